"""The only code that knows MPI: the communicator, what the ranks exchange per generation,
spawned black-box workers and the network-namespaced test cluster. Imports ``es.core`` alone."""
