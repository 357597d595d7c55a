"""Claim files (the official FEVEROUS jsonl) and scoring predictions against them."""
