"""The claim pipeline: pages, candidates, evidence, hops, verdict."""
