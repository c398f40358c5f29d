"""Black-box minimisation: ``es.minimize`` and ``es.AskTell`` over the strategies
(``minimizer``), and the test functions (``functions``)."""
