package commands

// helperDir is where make install-cli puts the programs docker rdma
// hands to the engine's host: rdma-exec and the OCI runtime.
const helperDir = "/usr/local/lib/rdma-macvlan"

// InstalledRuntime is where make install-cli puts rdma-macvlan-runtime, and
// what runtime install registers without --path.
const InstalledRuntime = helperDir + "/rdma-macvlan-runtime"
