// Package api is the one contract between the daemon, the docker rdma CLI,
// rdma-exec and the runtime: the wire format of the daemon's own HTTP
// interface, GET /v1/status, and a small client for it (api.go, client.go);
// the network options, their ranges, values and defaults, rdma-exec's
// environment and exit statuses (options.go); what the runtime reads from a
// container's environment (runtime.go). No other package spells one of
// these again (a test looks). It depends on the standard library
// only, so that programs which read the status (the docker rdma CLI plugin)
// do not link the daemon's netlink, logging and plugin-protocol packages.
//
// The JSON field names are a contract: tools parse the document, and a
// golden test (testdata/status.golden.json) holds them fixed. The daemon's
// persisted records are separate types in the driver package, converted to
// these when the status is built, so the on-disk format and the wire format
// can change independently.
package api

// StatusPath is where the daemon serves its status (contract).
const StatusPath = "/v1/status"

// BriefQuery asks StatusPath for the brief status: each network's ID, HCA
// port, CDI device, subnets, traffic class and service level, and its HCA
// problem if any; no endpoints, and nothing read from the kernel. The
// runtime asks it on every container start.
const BriefQuery = "brief=1"

// Values of a network's gid_check option, as the status reports them.
const (
	// GIDCheckWarn: a container whose GID entries do not appear starts
	// anyway and is reported not RDMA-ready (the default).
	GIDCheckWarn = "warn"
	// GIDCheckStrict: such a container fails to start where the engine's
	// call order allows it (Docker 28+).
	GIDCheckStrict = "strict"
)

// Status is the answer of GET /v1/status.
type Status struct {
	// Version is the daemon's release version (rdma-macvlan --version).
	Version string `json:"version"`
	// GIDTimeout is how long the daemon waits for an endpoint's GID
	// entries (--gid-timeout), as a Go duration ("10s"); rdma-exec waits
	// as long unless told otherwise.
	GIDTimeout string    `json:"gid_timeout,omitempty"`
	Networks   []Network `json:"networks"`
}

// Network describes one network and the RDMA device behind it.
type Network struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
	// VLAN is set when the parent is a VLAN sub-interface (IFNAME.VLAN).
	VLAN *VLAN  `json:"vlan,omitempty"`
	Mode string `json:"macvlan_mode"`
	MTU  int    `json:"mtu"`
	// MTUFromParent: no -o mtu; MTU is the parent's now, which new
	// containers take.
	MTUFromParent bool   `json:"mtu_from_parent,omitempty"`
	GIDCheck      string `json:"gid_check,omitempty"`
	// GIDCheckNote says why gid_check=strict works as warn on this engine.
	GIDCheckNote string `json:"gid_check_note,omitempty"`
	// AddressCheck is the -o address_check option: warn (probe each
	// container's addresses on the parent's segment after its start and
	// report duplicates), strict (refuse the start on a duplicate) or off.
	AddressCheck string     `json:"address_check,omitempty"`
	HCA          string     `json:"hca,omitempty"`
	Port         int        `json:"port,omitempty"`
	PortState    string     `json:"port_state,omitempty"`
	LinkLayer    string     `json:"link_layer,omitempty"`
	NetnsMode    string     `json:"netns_mode,omitempty"`
	RoCETypes    int        `json:"roce_types,omitempty"`
	GIDTable     *GIDTable  `json:"gid_table,omitempty"`
	Devices      []Device   `json:"devices,omitempty"`
	CDIDevice    string     `json:"cdi_device,omitempty"`
	Problems     []string   `json:"problems,omitempty"`
	Endpoints    []Endpoint `json:"endpoints"`
	// RDMADevice is the -o rdma_device override, if any.
	RDMADevice string `json:"rdma_device,omitempty"`
	// TrafficClass is the -o traffic_class option (the IP ToS byte, 0-255,
	// workloads are told to send RoCE v2 with: NCCL_IB_TC,
	// UCX_IB_TRAFFIC_CLASS); absent when not set.
	// Subnets are the network's IPv4 and IPv6 subnets (CIDR) as Docker's
	// IPAM gave them.
	Subnets      []string `json:"subnets,omitempty"`
	TrafficClass *int     `json:"traffic_class,omitempty"`
	// ServiceLevel is the -o service_level option (0-7: NCCL_IB_SL,
	// UCX_IB_SL); absent when not set.
	ServiceLevel *int `json:"service_level,omitempty"`
	// NodeGUID and PCI identify the HCA (its name follows probe order):
	// the daemon finds the HCA of the parent again by them at every
	// start. Either may be empty (a VF without a node GUID, a virtual
	// device without a PCI function).
	NodeGUID string `json:"node_guid,omitempty"`
	PCI      string `json:"pci,omitempty"`
}

// VLAN is the VLAN sub-interface a network's parent is.
type VLAN struct {
	// Lower is the device the sub-interface sits on: the real device, or
	// a VLAN itself when VLANs are stacked (QinQ).
	Lower string `json:"lower"`
	ID    int    `json:"id"`
	// Created is true when the daemon created the sub-interface (or shares
	// it with a network that did); only then does it delete it.
	Created bool `json:"created"`
	// Stack is the VLAN ids from the outer one (on the real device) to
	// the parent's, as the links are now: [100 200] for p0.100.200 on
	// p0.100 on p0. Chain says the same in words, and names the real
	// device: "p0.100.200: vlan 200 on p0.100, vlan 100 on p0". Both are
	// empty when the links cannot be read (a problem of the network says
	// why).
	Stack []int  `json:"stack,omitempty"`
	Chain string `json:"chain,omitempty"`
}

// GIDTable counts a port's GID slots.
type GIDTable struct {
	Size int `json:"size"`
	Used int `json:"used"`
	Free int `json:"free"`
	// Room is how many more entries admission would give new containers
	// now: the empty slots the kernel hands out (not the reserved default
	// slots, not a deleted entry's slot something still holds), less the
	// entries of containers started and not in the table yet. Free counts
	// every empty slot. Absent where it was not worked out (docker rdma's
	// view without the daemon).
	Room *int `json:"room,omitempty"`
}

// Device is a device node a container on the network needs.
type Device struct {
	Path  string `json:"path"`
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
}

// Endpoint describes one endpoint. Its GIDs are read from the table when
// the status is built, not remembered.
type Endpoint struct {
	ID string `json:"id"`
	// Ifname is the link's name in the host namespace, before Docker moves
	// and renames it.
	Ifname     string `json:"ifname"`
	IPv4       string `json:"ipv4,omitempty"`
	IPv6       string `json:"ipv6,omitempty"`
	MAC        string `json:"mac"`
	Sandbox    string `json:"sandbox,omitempty"`
	GIDs       []GID  `json:"gids"`
	RDMAReady  bool   `json:"rdma_ready"`
	RDMAReason string `json:"rdma_reason,omitempty"`
	// GIDDrift lists the entries found when the endpoint became ready
	// (the indexes its workload was given) that are no longer at that
	// index: the kernel deleted and added the port's entries again (a
	// bond failover, a device reset). Empty when nothing moved.
	GIDDrift []GIDMove `json:"gid_drift,omitempty"`
	// AddressConflicts are the endpoint's addresses another MAC on the
	// parent's segment answered for when it joined, or claimed or probed
	// for later (another host gave out the same address): RDMA traffic for
	// it may reach the other holder.
	AddressConflicts []AddressConflict `json:"address_conflicts,omitempty"`
}

// AddressConflict is one address of an endpoint that another MAC holds.
type AddressConflict struct {
	Address string `json:"address"`
	MAC     string `json:"mac"`
	// Seen is when the probe found it, or the frame claiming it was seen
	// (RFC 3339).
	Seen string `json:"seen"`
	// Probed: MAC only probed for the address (another host's start with
	// the same address, after this endpoint's): it may not hold it yet.
	Probed bool `json:"probed,omitempty"`
}

// GIDMove is one entry of an endpoint that moved after it was ready.
type GIDMove struct {
	GID  string `json:"gid"`
	Type string `json:"type"`
	// GivenIndex is where the entry was when the endpoint became ready;
	// Index where the same GID and type are now, -1 when nowhere.
	GivenIndex int `json:"given_index"`
	Index      int `json:"index"`
}

// GID is one RoCE GID entry of an endpoint.
type GID struct {
	Index int `json:"index"`
	// Type is the kernel's name of the entry's RoCE type ("IB/RoCE v1",
	// "RoCE v2").
	Type string `json:"type"`
	// GID is the entry as the kernel writes it (eight groups of four hex
	// digits).
	GID string `json:"gid"`
}
