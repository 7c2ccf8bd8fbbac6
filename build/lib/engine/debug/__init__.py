"""debug"""
