"""Claim files in, predictions and readable reports out."""
