"""laws"""
