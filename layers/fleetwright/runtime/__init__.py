"""Where the functions are put together: connections to AWS, the state table and the Kubernetes API
(``connections.py``) and each capability wired from them (``disruption.py``). Capabilities never import this
package; the handlers and the local sandbox do."""
