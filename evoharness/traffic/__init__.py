"""Production traffic fed back into evolution (issue 34): sampled Render records, their
storage layout and redaction (``records``), drift from the tasks a harness was evolved on
(``drift``), and label-free task sets built from traffic (``tasks``)."""
