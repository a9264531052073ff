package api

import "time"

// The network options of rdma-macvlan, what `docker network create -o`
// takes: the daemon parses them, the CLI, rdma-exec and the runtime read
// them from Docker's copy of a network's options. Same names and meaning as
// Docker's built-in macvlan driver where they overlap.
const (
	OptParent     = "parent"
	OptMode       = "macvlan_mode"
	OptMTU        = "mtu"
	OptRDMADevice = "rdma_device"
	OptGIDCheck   = "gid_check"
	// OptAddressCheck: probe each container's addresses on the parent's
	// segment, and watch it, for another host holding them.
	OptAddressCheck = "address_check"
	// OptTrafficClass and OptServiceLevel are the QoS every workload on the
	// network is told to send RoCE with (see TrafficClassMax).
	OptTrafficClass = "traffic_class"
	OptServiceLevel = "service_level"
)

// Ranges of the QoS options: the traffic class is the IP ToS byte RoCE v2
// packets carry (DSCP in its upper six bits, ECN in the lower two), as
// NCCL_IB_TC and UCX_IB_TRAFFIC_CLASS take it; the service level is the
// 802.1p priority (PCP) of a VLAN-tagged frame, as NCCL_IB_SL and UCX_IB_SL
// take it. Both start at 0.
const (
	TrafficClassMax = 255
	ServiceLevelMax = 7
)

// address_check values: warn probes after the start and reports a
// duplicate; strict probes before the start answers and refuses it; off
// sends and watches nothing. (gid_check's are GIDCheckWarn and
// GIDCheckStrict.)
const (
	AddressCheckWarn   = "warn"
	AddressCheckStrict = "strict"
	AddressCheckOff    = "off"
)

// Macvlan modes (macvlan_mode), as Docker's built-in macvlan names them.
const (
	ModeBridge   = "bridge"
	ModePrivate  = "private"
	ModeVEPA     = "vepa"
	ModePassthru = "passthru"
)

// DefaultGIDTimeout is how long a container's GID entries are waited for
// after it joins, by the daemon (gid_check=strict, the status) and by
// rdma-exec, unless told otherwise (the daemon's --gid-timeout, which the
// runtime takes from the status; EnvGIDTimeout).
const DefaultGIDTimeout = 10 * time.Second

// rdma-exec's environment of its own, removed from the workload's.
const (
	// EnvExecSysfsRoot points rdma-exec at a fake sysfs tree. For tests
	// only: a container's own /sys is the real one.
	EnvExecSysfsRoot = "RDMA_EXEC_SYSFS_ROOT"
	// EnvExecTiming set to 1 makes rdma-exec say on stderr, before it execs
	// the workload, how long it waited for the GID entries and how many
	// looks at the tables that took (make bench reads it).
	EnvExecTiming = "RDMA_EXEC_TIMING"
)

// Exit statuses of rdma-exec, when it does not start the workload (a
// started workload's status is its own).
const (
	// ExitQoSConflict: the container's networks ask for different traffic
	// classes or service levels, which NCCL and UCX take one of for every
	// device, and the user set no value of their own.
	ExitQoSConflict = 120
	// ExitGIDMismatch: the entries appeared, but their indexes differ per
	// port and no setting makes NCCL and UCX use the container's own entry
	// on every port (--accept-gid-mismatch starts the workload anyway).
	ExitGIDMismatch = 121
	// ExitNotReady: the container's GID entries did not appear within the
	// timeout.
	ExitNotReady = 122
	// ExitUsage: rdma-exec was called with invalid arguments.
	ExitUsage = 123
	// ExitCannotExec and ExitNotFound: the workload's executable could not
	// be run or was not found, as a shell and docker run say.
	ExitCannotExec = 126
	ExitNotFound   = 127
	// ExitSignal plus the signal's number: SIGTERM, SIGINT, SIGHUP or
	// SIGQUIT came while rdma-exec waited (143 for docker stop's SIGTERM),
	// as a shell reports a command the signal killed.
	ExitSignal = 128
)
