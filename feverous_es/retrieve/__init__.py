"""Retrieval stages of the claim pipeline: pages, candidate elements, table scores, evidence
selection and next-hop queries."""
