package api

// The runtime's names (contract): the variables a container's environment
// may set to steer rdma-macvlan-runtime, and the runtime's name in
// daemon.json. rdma-macvlan-runtime --help and the README describe each.
const (
	// RuntimeName is the runtime's name in daemon.json's runtimes (docker
	// run --runtime rdma-macvlan, default-runtime).
	RuntimeName = "rdma-macvlan"

	// CDIKind is the vendor/class of the CDI devices the plugin publishes,
	// one per HCA port in use (--device rdma-macvlan/hca=NAME).
	CDIKind = "rdma-macvlan/hca"

	// EnvDevices picks the container's HCA ports: unset or "auto", those
	// of its rdma-macvlan networks; "none", no change at all; else a
	// comma list of HCA names or CDI device names (rdma-macvlan/hca=NAME
	// or NAME) of ports the plugin publishes.
	EnvDevices = "RDMA_MACVLAN_DEVICES"
	// EnvNoWait set to 1 starts the workload directly, without rdma-exec
	// (docker rdma run --no-wait).
	EnvNoWait = "RDMA_MACVLAN_NO_WAIT"
	// EnvGIDTimeout is how long rdma-exec waits for the GID entries (a Go
	// duration); default: the plugin's gid_timeout.
	EnvGIDTimeout = "RDMA_MACVLAN_GID_TIMEOUT"
	// EnvRoCEVersion is the RoCE version of the GID entry to use: 1 or 2
	// (default 2).
	EnvRoCEVersion = "RDMA_MACVLAN_ROCE_VERSION"
	// EnvGIDFamily is the address family of that entry: auto, ipv4 or
	// ipv6.
	EnvGIDFamily = "RDMA_MACVLAN_GID_FAMILY"
	// EnvAcceptMismatch set to 1 starts the workload even when its GID
	// indexes differ per rail (docker rdma run --accept-gid-mismatch).
	EnvAcceptMismatch = "RDMA_MACVLAN_ACCEPT_GID_MISMATCH"
	// EnvIPCLock set to 0 leaves CAP_IPC_LOCK out.
	EnvIPCLock = "RDMA_MACVLAN_IPC_LOCK"
	// EnvSysfs set to "host" leaves /sys/class/infiniband and
	// /sys/class/infiniband_verbs as the host has them; the default,
	// "filtered", shows the container's HCAs only.
	EnvSysfs = "RDMA_MACVLAN_SYSFS"
	// EnvRDMALimit sets the RDMA cgroup's limits (rdma.max) for each of
	// the container's HCAs: "hca_handle=N,hca_object=M", either or both.
	EnvRDMALimit = "RDMA_MACVLAN_RDMA_LIMIT"
)

// Values of EnvDevices and EnvSysfs.
const (
	DevicesAuto     = "auto"
	DevicesNone     = "none"
	SysfsFiltered   = "filtered"
	SysfsHost       = "host"
	RDMALimitHandle = "hca_handle"
	RDMALimitObject = "hca_object"
)
