"""calls"""
