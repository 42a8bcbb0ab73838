"""The termination workflow's contract, shared by every capability that retires a node: the request it takes
(``request.py``), starting it once per node (``starter.py``), and the claim book its steps update
(``claimbook.py``)."""
