// Package driver is rdma-macvlan's network driver: Docker's calls on
// networks and endpoints, the registry of both, the claims that order the
// calls on one endpoint, the records of both in the state directory and
// the reconciliation of the host with them at start. It knows nothing of
// HTTP (package plugin adapts it to Docker's remote driver protocol), and
// the GID accounting of the RDMA ports is package gid's tracker.
//
// One job a file: driver.go (Config, New, Close), claim.go (the lock rule
// and the claim on an endpoint), network.go (CreateNetwork,
// DeleteNetwork), parent.go (a network's parent and its VLAN), detect.go
// (the RDMA port behind a parent), cdi.go (the life cycle of the CDI
// specs), endpoint.go (CreateEndpoint, DeleteEndpoint, EndpointInfo),
// join.go, leave.go, strict.go (gid_check=strict), gids.go (what the
// driver asks of the GID tracker and how it records a watch's outcome),
// status.go (/v1/status), options.go (-o and driver-opt options), ids.go
// (IDs and link names), requests.go (checks of what a request carries),
// identity.go (the HCA found again at start, by its identity),
// retry.go (a repeated CreateNetwork), records.go (the persisted
// records), store.go (the state directory), restore.go (the start),
// collect.go (endpoints of removed containers), owner.go (the owner
// mark), errors.go (the kinds of refusal), crash.go (crash points).
package driver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/driver/gid"
	"github.com/rdma-macvlan/rdma-macvlan/netns"
	"github.com/rdma-macvlan/rdma-macvlan/rdma"
	"github.com/sirupsen/logrus"
)

// Links is what the driver needs from the host network namespace.
// *netns.Handle implements it.
type Links interface {
	LinkByName(name string) (netns.Link, error)
	LinkByIndex(idx int) (netns.Link, error)
	Links() ([]netns.Link, error)
	CreateMacvlan(spec netns.MacvlanSpec) (netns.Link, error)
	CreateVLAN(name, lower string, id int, alias string) (netns.Link, error)
	DeleteLink(name string) error
	SetAlias(name, alias string) error
	// PeerLinks lists the links with ifalias alias in the other network
	// namespaces that have an ID in this one: where containers' links are.
	PeerLinks(alias string) ([]netns.Link, error)
}

// Config holds the driver's dependencies.
type Config struct {
	StateDir string
	Links    Links
	// Sysfs reads every RDMA fact (under --sysfs-root); it logs to Log.
	Sysfs *rdma.Sysfs
	// NetnsMode asks RDMA netlink for the netns mode; nil or an error falls
	// back to sysfs.
	NetnsMode func() (string, error)
	// RDMAPorts asks RDMA netlink which netdev each RDMA port serves, to
	// find a parent's port (see ports.go). It is used only when Sysfs
	// reads the host's sysfs (root "/"): a fake tree is another world
	// than the kernel's. Nil or an error falls back to sysfs.
	RDMAPorts RDMAPorts
	// CDIDir receives one CDI spec per HCA in use.
	CDIDir string
	// GIDTimeout bounds the wait for an endpoint's GID entries after Join
	// (default api.DefaultGIDTimeout); GIDPoll is the polling interval.
	GIDTimeout time.Duration
	GIDPoll    time.Duration
	// UnjoinedGrace is how long an endpoint found at start without a
	// sandbox may wait for its Join before it is deleted (default
	// DefaultUnjoinedGrace): Docker never joins an endpoint whose
	// CreateEndpoint answer a crash lost.
	UnjoinedGrace time.Duration
	// GIDTableMaxAge lets GID admission use a read of the port's table up
	// to this old, and lets admission and the GID watch read only the
	// slots that can have changed since the last read, with a full read
	// at least every 30 s, for a watch that waits long, and before any
	// refusal or timeout (0: read every
	// slot for every CreateEndpoint and every look). Reading a full table
	// costs one file per slot; the daemon uses DefaultGIDTableMaxAge.
	GIDTableMaxAge time.Duration
	Log            *logrus.Logger // nil: logrus.StandardLogger()
	// Version is the daemon's release version, reported in /v1/status.
	Version string
	// Observer, if not nil, is told of state writes and GID watch outcomes
	// (the daemon's metrics).
	Observer Observer
	// ProbeAddress, if not nil, asks a parent's segment who holds an
	// address (addrcheck.go); nil sends no probe, whatever address_check
	// says.
	ProbeAddress ProbeFunc
	// WatchClaims, if not nil, watches a parent's segment for other hosts'
	// claims of addresses (addrcheck.go); nil watches nothing.
	WatchClaims WatchFunc
}

// Defaults of Config.
const (
	DefaultGIDPoll = 25 * time.Millisecond

	DefaultUnjoinedGrace = 2 * time.Minute

	DefaultGIDTableMaxAge = 250 * time.Millisecond
)

// Driver implements the network driver. Calls arrive concurrently; one mutex
// guards the in-memory state, and each endpoint is changed by one call at a
// time (see claim.go), so that state, links and files always agree. The GID
// accounting of the RDMA ports is the tracker's (package gid), which has a
// lock of its own.
type Driver struct {
	links     Links
	store     *store
	log       *logrus.Logger
	rdma      *rdma.Sysfs
	netnsMode func() (string, error)
	rdmaPorts RDMAPorts // nil unless rdma reads the host's sysfs
	cdiDir    string
	grace     time.Duration
	gidWait   time.Duration // cfg.GIDTimeout, reported in the status
	owner     string        // ifalias of every link this instance creates
	version   string
	gids      *gid.Tracker
	gcTimer   *time.Timer // deletes endpoints never joined after a restart
	obs       *observing  // the Observer, and when watched endpoints joined
	// probe asks a parent's segment who holds an address, watch listens
	// to it for other hosts' claims (nil: never); the probes after Join
	// and the watches run under probeCtx, which Close cancels before it
	// waits for them.
	probe       ProbeFunc
	watch       WatchFunc
	watching    map[string]bool // parents watched, under mu
	probeCtx    context.Context
	probeCancel context.CancelFunc
	probes      sync.WaitGroup

	// netsMu is held by the calls that change which networks exist
	// (CreateNetwork, DeleteNetwork) and by the start-up reconciliation of
	// CDI specs, for their whole length: which CDI specs must exist
	// changes only under it. So these calls read, write and remove CDI
	// specs holding netsMu and not mu: the CDI directory is shared with
	// other producers, and its I/O never holds up the calls that only
	// need mu (/v1/status, the endpoint calls). Taken before mu, never
	// while holding it (the lock rule: claim.go).
	netsMu sync.Mutex
	// cdiIO, if not nil, is called before each file operation in the CDI
	// directory, with what it is about to do and the path: tests stall
	// it there, as a slow or hung file system would.
	cdiIO func(op, path string)

	mu       sync.Mutex
	networks map[string]*netState // guarded by mu (and netsMu: claim.go)
	// endpoints are the endpoint IDs the driver knows, reserved ones too
	// (epState): lookups and loops that want only the endpoints that
	// exist go through d.endpoint and d.live. Guarded by mu.
	endpoints map[string]*epState
	busy      map[string]chan struct{} // endpoint IDs a call works on (the claim); guarded by mu
	// cdiNodes are the device nodes each CDI spec this process wrote
	// lists, by CDI device name: a device registered again while running
	// has others (recheckHCA).
	cdiNodes map[string][]rdma.DeviceNode
	ifnames  map[string]string // link name -> endpoint ID, reserved ones too; guarded by mu
	stopping chan struct{}     // closed by Stopping: strict waits end
	stopOnce sync.Once

	// lastCollect is when collectGone last read other namespaces (guarded
	// by mu); a full table looks again only collectEvery later.
	lastCollect  time.Time
	collectEvery time.Duration
}

// collectEvery bounds how often a full GID table makes the driver read
// every container's namespace (about 0.1 ms each).
const defaultCollectEvery = 10 * time.Second

// Sentinel errors, wrapped with the object's name.
var (
	ErrNetworkNotFound  = errors.New("network not found")
	ErrEndpointNotFound = errors.New("endpoint not found")
)

// New loads the state in cfg.StateDir and reconciles the host with it: it
// re-creates VLAN sub-interfaces the driver owns and deletes links with the
// driver's prefix that no endpoint owns (left by a crash).
func New(cfg Config) (*Driver, error) {
	if cfg.Links == nil || cfg.Sysfs == nil || cfg.CDIDir == "" {
		return nil, errors.New("driver: Links, Sysfs and CDIDir are required")
	}
	if cfg.GIDTimeout <= 0 {
		cfg.GIDTimeout = api.DefaultGIDTimeout
	}
	if cfg.GIDPoll <= 0 {
		cfg.GIDPoll = DefaultGIDPoll
	}
	if cfg.UnjoinedGrace <= 0 {
		cfg.UnjoinedGrace = DefaultUnjoinedGrace
	}
	log := cfg.Log
	if log == nil {
		log = logrus.StandardLogger()
	}
	st, err := openStore(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	st.onNotDurable = func(err error) {
		log.WithError(err).Error("state change done but not durable: the disk failed to sync it; a crash before the next successful write may undo it")
	}
	obs := &observing{o: cfg.Observer}
	st.obs = obs
	var ports RDMAPorts
	if cfg.Sysfs.Host() {
		ports = cfg.RDMAPorts
	}
	for _, w := range st.exposure() {
		log.WithField("state_dir", cfg.StateDir).Warn(w)
	}
	d := &Driver{
		links:     cfg.Links,
		store:     st,
		log:       log,
		rdma:      cfg.Sysfs.WithLog(log),
		netnsMode: cfg.NetnsMode,
		rdmaPorts: ports,
		cdiDir:    cfg.CDIDir,
		grace:     cfg.UnjoinedGrace,
		gidWait:   cfg.GIDTimeout,
		version:   cfg.Version,
		obs:       obs,
		networks:  make(map[string]*netState),
		endpoints: make(map[string]*epState),
		busy:      make(map[string]chan struct{}),

		cdiNodes: make(map[string][]rdma.DeviceNode),
		ifnames:  make(map[string]string),
		stopping: make(chan struct{}),

		collectEvery: defaultCollectEvery,
		probe:        cfg.ProbeAddress,
		watch:        cfg.WatchClaims,
		watching:     make(map[string]bool),
	}
	d.probeCtx, d.probeCancel = context.WithCancel(context.Background())
	d.gids = gid.New(gid.Config{Sysfs: d.rdma, Timeout: cfg.GIDTimeout, Poll: cfg.GIDPoll, MaxAge: cfg.GIDTableMaxAge, Report: d.watchEnded, Drift: d.gidsMoved})
	id, recovered, err := st.instanceID(func() string { return recoverInstanceID(st, cfg.Links, log.WithField("op", "restore")) })
	if err != nil {
		st.close()
		return nil, err
	}
	d.owner = ownerMark(id)
	if recovered {
		log.WithFields(logrus.Fields{"state_dir": cfg.StateDir, "instance": id}).
			Warn("instance ID file was missing or unusable: took the ID back from the links this state directory's records name, and wrote it again")
	}
	if err := d.restore(); err != nil {
		st.close()
		return nil, err
	}
	// The CDI directory is shared with other producers: its files are
	// read and written without d.mu.
	d.reconcileCDI(d.logFor("restore", nil))
	return d, nil
}

// Close releases the state directory. It leaves every link as it is: running
// containers keep their network across a plugin restart.
func (d *Driver) Close() {
	d.mu.Lock()
	if d.gcTimer != nil {
		d.gcTimer.Stop()
	}
	// Calls under way finish their kernel and disk work first.
	for len(d.busy) > 0 {
		for _, ch := range d.busy {
			d.mu.Unlock()
			<-ch
			d.mu.Lock()
			break
		}
	}
	d.mu.Unlock()
	d.probeCancel()
	d.probes.Wait()
	d.gids.Close()
	d.store.close()
}

// Stopping ends every gid_check=strict wait in progress with an error that
// says the daemon is stopping, so that the calls in progress finish at once.
// The engine kills a managed plugin 10 s after SIGTERM, no longer than one
// strict wait may take (api.DefaultGIDTimeout), so the server calls this before
// it waits for the calls in progress. The GID watches themselves go on until
// Close, and resume at the next start.
func (d *Driver) Stopping() {
	d.stopOnce.Do(func() { close(d.stopping) })
}

func (d *Driver) logFor(op string, fields logrus.Fields) *logrus.Entry {
	e := d.log.WithField("op", op)
	if len(fields) > 0 {
		e = e.WithFields(fields)
	}
	return e
}

// Capabilities is what GetCapabilities answers: local scope (state lives on
// this host) with global connectivity, as the built-in macvlan driver, so
// swarm services can use --config-only/--config-from networks.
type Capabilities struct {
	Scope             string
	ConnectivityScope string
	// GatewayAllocCheck asks engines that know the call (Docker 28+) to
	// ask SkipGatewayAllocation before creating a network.
	GatewayAllocCheck bool
}

// GetCapabilities reports the driver's scopes; they never change.
func GetCapabilities() Capabilities {
	return Capabilities{Scope: "local", ConnectivityScope: "global", GatewayAllocCheck: true}
}

// SkipGatewayAllocation reports whether Docker 28+ may leave a network with
// options opts without a gateway address when the user gives none. As the
// built-in macvlan answers since Docker 28: yes, a macvlan network's gateway is
// a router outside Docker that only the user can name (--gateway); without one
// the containers have no default route instead of one via an address nobody
// owns, and that address is free for --ip and --aux-address.
//
// Except with gid_check=strict: Docker asks the driver to program external
// connectivity (where strict holds the start) only for the endpoint that is a
// container's gateway, and an endpoint without a gateway address is none. A
// strict network keeps the gateway Docker reserves, as on engines before 28.
// Unparseable options are the business of CreateNetwork, which follows.
func SkipGatewayAllocation(opts []Option) bool {
	o, err := ParseNetworkOptions(opts)
	return err != nil || o.GIDCheck != api.GIDCheckStrict
}
