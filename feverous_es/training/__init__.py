"""Training, export and the model card of the pipeline's learned parts (torch only here)."""

# The trainers of models the package does not ship, named here once (`train --help` lists
# them): a user's plugin option reads what they write, or they were measured and not shipped
# (docs/decisions.md says what each measured).
UNSHIPPED = {
    "hop": "a next-hop generator for the `seq2seq` hop plugin; the default hop follows links",
}
