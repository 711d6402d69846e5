"""grouped"""
