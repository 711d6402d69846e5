"""structures"""
