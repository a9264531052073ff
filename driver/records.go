package driver

import (
	"time"
)

// Subnet is one IPAM pool of a network as Docker sent it.
type Subnet struct {
	Pool    string `json:"pool"`              // CIDR, e.g. 192.168.7.0/24
	Gateway string `json:"gateway,omitempty"` // CIDR, e.g. 192.168.7.1/24
}

// VLAN records a parent of the form IFNAME.VLAN.
type VLAN struct {
	Lower string `json:"lower"`
	ID    int    `json:"id"`
	// Created is true when the driver created the sub-interface (or shares it
	// with a network that did); only then does it delete it.
	Created bool `json:"created"`
}

// network is the persistent record of one network: only what is persisted
// (what the driver knows of a network at run time only is beside it, in
// its netState).
type network struct {
	ID         string       `json:"id"`
	Parent     string       `json:"parent"` // the macvlan master
	VLAN       *VLAN        `json:"vlan,omitempty"`
	Mode       string       `json:"macvlan_mode"`
	MTU        int          `json:"mtu"`
	RDMADevice string       `json:"rdma_device,omitempty"`
	RDMA       *networkRDMA `json:"rdma,omitempty"`
	GIDCheck   string       `json:"gid_check,omitempty"`
	// AddressCheck is the -o address_check option; "" (records of
	// versions before it) is warn.
	AddressCheck string `json:"address_check,omitempty"`
	// TrafficClass and ServiceLevel are the -o traffic_class and
	// service_level options; nil when not given (and in records of versions
	// before them).
	TrafficClass *int              `json:"traffic_class,omitempty"`
	ServiceLevel *int              `json:"service_level,omitempty"`
	IPv4         []Subnet          `json:"ipv4,omitempty"`
	IPv6         []Subnet          `json:"ipv6,omitempty"`
	EnableIPv6   bool              `json:"enable_ipv6,omitempty"`
	Internal     bool              `json:"internal,omitempty"`
	Options      map[string]string `json:"options,omitempty"`
	Created      time.Time         `json:"created"`
}

// netState is a network the driver knows: its record, and what the driver
// knows of the network at run time only, which is never persisted and
// goes with the network. It is beside the record, not in it: records are
// copied without d.mu (under d.netsMu, to be changed and saved), and
// these change under d.mu alone.
type netState struct {
	*network
	// removing: DeleteNetwork is removing it; no endpoint is created on
	// it. Guarded by d.mu.
	removing bool
	// strictNote says why gid_check=strict could not hold the last start
	// on it (the engine's call order); not persisted: the engine may be
	// upgraded. Guarded by d.mu.
	strictNote string
	// hcaProblem says why its RDMA device was not found at start (gone,
	// or not told apart; identity.go): its endpoints are refused and it
	// has no CDI spec. Changed only with both d.netsMu and d.mu held (at
	// start, and when the device is found again), read with either.
	hcaProblem string
}

// epState is an endpoint ID the driver knows: its record, and where it is
// in its life at run time, which is never persisted. The phase is not a
// field of the record: a record is copied to be saved without d.mu, and the
// copy carries none of it. (The record is embedded by value: one
// allocation, and loops over every endpoint read one object each.)
//
// An ID's life: CreateEndpoint reserves it (epReserved: its link name and
// addresses are taken, its GID entries once admitted, and nothing exists
// yet) and records it (epLive) or
// drops it; a Join or Leave changes its record (joined: Sandbox is set);
// a GID watch this process resumed for a container already running, at
// start or when a missing HCA was found again, makes it epResumed until a
// Join starts a watch of its own; DeleteEndpoint (or the collection of a
// gone container, or the deletion of one never joined) drops it. Calls on
// it take turns through the claim (claim.go), which also covers IDs that
// are not known yet.
type epState struct {
	endpoint
	phase epPhase
}

// epPhase is where an endpoint is in its life; see epState.
type epPhase uint8

const (
	epReserved epPhase = iota + 1
	epLive
	epResumed
)

// endpoint is the persistent record of one endpoint. It carries its parent
// and mode so that its link can be re-created even if its network's record
// was lost. Records written by earlier versions also hold "options" (the
// driver options Docker sent, whose only one, mtu, is in MTU); nothing read
// it and loading ignores it.
type endpoint struct {
	ID        string `json:"id"`
	NetworkID string `json:"network_id"`
	Ifname    string `json:"ifname"` // host-side link name
	Parent    string `json:"parent"`
	Mode      string `json:"macvlan_mode"`
	MTU       int    `json:"mtu"`
	MAC       string `json:"mac"`
	IPv4      string `json:"ipv4,omitempty"`    // CIDR
	IPv6      string `json:"ipv6,omitempty"`    // CIDR
	Sandbox   string `json:"sandbox,omitempty"` // set between Join and Leave
	// DstName is the interface name asked inside the container; "" for
	// Docker's eth0, eth1, ...
	DstName string    `json:"dst_name,omitempty"`
	Created time.Time `json:"created"`
	// GIDNeed is the number of GID entries the endpoint will take.
	GIDNeed int `json:"gid_need,omitempty"`
	// GIDTypes is the number of RoCE types (entries per address) of the
	// port when the endpoint was admitted.
	GIDTypes int `json:"gid_types,omitempty"`
	// GIDs, RDMAReady and RDMAReason record the last GID watch.
	GIDs       []endpointGID `json:"gids,omitempty"`
	RDMAReady  bool          `json:"rdma_ready,omitempty"`
	RDMAReason string        `json:"rdma_reason,omitempty"`
	// Conflicts are the addresses another MAC answered for at the last
	// Join's probe, or claimed or probed for on the parent's segment since
	// (addrcheck.go); cleared by Leave and the next Join.
	Conflicts []addressConflict `json:"address_conflicts,omitempty"`
}
