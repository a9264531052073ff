// Package engines is the one table of the Docker engines the project runs
// on and tests: their releases, API versions, how scripts/engines.sh gets
// them, which make check runs, and what each does for a remote network
// driver. The scripts, the Makefile and the docs do not spell an engine
// again; they use files generated from this table:
//
//   - scripts/lib/engines.sh: the engines as bash arrays (scripts/engines.sh,
//     scripts/dockerd.sh, scripts/check.sh and the e2e harness source it);
//   - scripts/lib/engines.mk: make check's engines and a target per engine
//     make check leaves out (the Makefile includes it);
//   - the table between the engines markers of docs/engines.md.
//
// Adding an engine is adding a row and running go generate
// ./internal/engines; TestGeneratedFilesAreCurrent fails until then.
// docker rdma asks the engine API in the newest engine's version at most
// (cmd/docker-rdma/internal/docker).
package engines

//go:generate go test -run TestGeneratedFilesAreCurrent -update .

// Build is how scripts/engines.sh gets an engine.
type Build string

const (
	// Debian is Debian 12's docker.io package, from apt.
	Debian Build = "debian"
	// DockerSource is github.com/docker/docker at a release tag, a module
	// without go.mod: its source from the Go module proxy, built with its
	// vendor.mod as go.mod.
	DockerSource Build = "docker-source"
	// MobySource is a module with go.mod (moby v2): go install.
	MobySource Build = "moby-source"
)

// Role is what make check does with an engine.
type Role string

const (
	// RoleOldest and RoleNewest run every suite; there is one of each.
	RoleOldest Role = "oldest"
	RoleNewest Role = "newest"
	// RoleMiddle runs the managed plugin and a subset of the differential
	// scenarios (cold CI time).
	RoleMiddle Role = "middle"
	// RoleOnDemand is left out of make check: make e2e-NAME runs the
	// middle engines' subset on it alone.
	RoleOnDemand Role = "on-demand"
)

// CDI is how an engine resolves `--device VENDOR/CLASS=NAME`.
type CDI string

const (
	NoCDI      CDI = "none"    // before Docker 25: no CDI
	CDIFlag    CDI = "flag"    // 25 to 28.1: with {"features": {"cdi": true}}
	CDIDefault CDI = "default" // 28.2 on
)

// Engine is one engine.
type Engine struct {
	// Name is the engine's name in the scripts and suites
	// (scripts/engines.sh install NAME, e2e.sh NAME).
	Name string
	// Title names the release in the docs.
	Title string
	// Major is its Docker major version (moby v2 is Docker 29), which the
	// suites compare (engine_since).
	Major int
	// API is the newest engine API version it speaks.
	API string
	// Build is how it is got; Module and Version what is built (a source
	// build), VersionEnv the variable of scripts/engines.sh that overrides
	// Version.
	Build                       Build
	Module, Version, VersionEnv string
	Role                        Role
	CDI                         CDI
	// Strict: the engine asks a remote driver's Join before it starts the
	// container's process and fails the start on its error, so
	// gid_check=strict holds the start (Docker 28 on).
	Strict bool
	// GatewayCheck: the engine asks a remote driver whether a network
	// needs a gateway address (GwAllocCheck, Docker 28 on).
	GatewayCheck bool
	// Ifname: the engine passes on the interface name a driver's Join
	// answers (com.docker.network.endpoint.ifname; moby v2).
	Ifname bool
}

// All are the engines, oldest first.
var All = []Engine{
	{Name: "debian", Title: "Docker 20.10.24 (Debian)", Major: 20, API: "1.41", Build: Debian, Role: RoleOldest, CDI: NoCDI},
	{Name: "v27", Title: "Docker 27.5.1", Major: 27, API: "1.47", Build: DockerSource, Module: "github.com/docker/docker",
		Version: "v27.5.1", VersionEnv: "DOCKER27_VERSION", Role: RoleOnDemand, CDI: CDIFlag},
	{Name: "v28", Title: "Docker 28.5.2", Major: 28, API: "1.51", Build: DockerSource, Module: "github.com/docker/docker",
		Version: "v28.5.2", VersionEnv: "DOCKER28_VERSION", Role: RoleMiddle, CDI: CDIDefault, Strict: true, GatewayCheck: true},
	{Name: "current", Title: "moby v2.0.0-beta.24", Major: 29, API: "1.56", Build: MobySource, Module: "github.com/moby/moby/v2",
		Version: "v2.0.0-beta.24", VersionEnv: "MOBY_VERSION", Role: RoleNewest, CDI: CDIDefault, Strict: true, GatewayCheck: true, Ifname: true},
}

// Newest is the newest engine.
func Newest() Engine { return withRole(RoleNewest) }

// Oldest is the oldest engine.
func Oldest() Engine { return withRole(RoleOldest) }

func withRole(r Role) Engine {
	for _, e := range All {
		if e.Role == r {
			return e
		}
	}
	panic("engines: no " + string(r) + " engine")
}
