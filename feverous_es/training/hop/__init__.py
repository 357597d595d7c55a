"""The hop trainer: a seq2seq model that proposes the next hop's query from a claim and its
evidence (data, fit, card; `feverous-es train hop`)."""
