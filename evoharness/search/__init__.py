"""Search protocols other than TRACE's attributed rounds (issue 31): the mutation proposer,
AutoRef-style beam search, blind random search and best-of-N at a matched budget."""
