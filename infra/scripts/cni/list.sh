# Lists the CNI configuration directory .Dir one entry a line, directories
# with a trailing slash, for cniconf.FromListing. A missing directory
# lists nothing: a node without a network yet is an answer, not an error.
ls -1Ap {{q .Dir}} 2>/dev/null || true
