package engines

import (
	"fmt"
	"strings"
)

const generated = "Generated from internal/engines/engines.go by go generate ./internal/engines: do not edit."

// names are the names of the engines of role r, oldest first; every
// engine's when r is "".
func names(r Role) []string {
	var out []string
	for _, e := range All {
		if r == "" || e.Role == r {
			out = append(out, e.Name)
		}
	}
	return out
}

// Shell is scripts/lib/engines.sh.
func Shell() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# shellcheck shell=bash\n# %s\n", generated)
	b.WriteString(`# shellcheck disable=SC2034 # the scripts that source it read them
#
# The engines, oldest first, as scripts/engines.sh, scripts/dockerd.sh, scripts/check.sh and the
# e2e harness name them. make check runs the oldest, the middle and the newest; an on-demand engine
# runs with make e2e-NAME (scripts/lib/engines.mk). Per engine: its Docker major version (moby v2
# is 29), how scripts/engines.sh gets it (debian: apt; docker-source: a docker/docker release built
# with its vendor.mod; moby-source: go install of a module), the module and version built and the
# variable that overrides the version. Only what a script reads is here.
`)
	fmt.Fprintf(&b, "ENGINE_NAMES=(%s)\n", strings.Join(names(""), " "))
	fmt.Fprintf(&b, "ENGINE_OLDEST=%s\n", Oldest().Name)
	fmt.Fprintf(&b, "ENGINE_NEWEST=%s\n", Newest().Name)
	fmt.Fprintf(&b, "ENGINE_MIDDLE=(%s)\n", strings.Join(names(RoleMiddle), " "))
	for _, col := range []struct {
		name string
		get  func(Engine) string
	}{
		{"ENGINE_MAJOR", func(e Engine) string { return fmt.Sprint(e.Major) }},
		{"ENGINE_BUILD", func(e Engine) string { return string(e.Build) }},
		{"ENGINE_MODULE", func(e Engine) string { return e.Module }},
		{"ENGINE_VERSION", func(e Engine) string { return e.Version }},
		{"ENGINE_VERSION_ENV", func(e Engine) string { return e.VersionEnv }},
	} {
		var cells []string
		for _, e := range All {
			v := col.get(e)
			if v == "" {
				v = `""`
			}
			cells = append(cells, fmt.Sprintf("[%s]=%s", e.Name, v))
		}
		fmt.Fprintf(&b, "declare -A %s=(%s)\n", col.name, strings.Join(cells, " "))
	}
	return b.String()
}

// Make is scripts/lib/engines.mk.
func Make() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", generated)
	b.WriteString("# make check's engines, oldest first (make e2e and its parts install them), the oldest and the\n# newest, and the newest.\n")
	var check []string
	for _, e := range All {
		if e.Role != RoleOnDemand {
			check = append(check, e.Name)
		}
	}
	fmt.Fprintf(&b, "E2E_ENGINES := %s\n", strings.Join(check, " "))
	fmt.Fprintf(&b, "E2E_ENDS := %s %s\n", Oldest().Name, Newest().Name)
	fmt.Fprintf(&b, "E2E_NEWEST := %s\n", Newest().Name)
	for _, e := range All {
		if e.Role != RoleOnDemand {
			continue
		}
		var middle []string
		for _, m := range All {
			if m.Role == RoleMiddle || m.Name == e.Name {
				middle = append(middle, m.Name)
			}
		}
		fmt.Fprintf(&b, "\n.PHONY: e2e-%s\n", e.Name)
		fmt.Fprintf(&b, "e2e-%[1]s: ## [6 min, its engine built 5 more the first time; root; PKGS; ENGINES] the managed plugin, the differential subset and the default bridge on %[2]s alone, as a middle engine (root; not in make check: each engine adds its build and about 2 minutes of tests to a cold CI run)\n", e.Name, e.Title)
		fmt.Fprintf(&b, "\tbash scripts/engines.sh install %s %s\n", Oldest().Name, e.Name)
		for _, suite := range []string{"e2e", "e2e-diff", "e2e-bridge"} {
			fmt.Fprintf(&b, "\tE2E_MIDDLE_ENGINES=\"%s\" bash test/e2e/%s.sh %s\n", strings.Join(middle, " "), suite, e.Name)
		}
	}
	return b.String()
}

// Markers around the generated table in docs/engines.md.
const (
	DocsBegin = "<!-- engines:begin: generated from internal/engines/engines.go by go generate ./internal/engines -->"
	DocsEnd   = "<!-- engines:end -->"
)

// Docs is the table between the markers of docs/engines.md.
func Docs() string {
	var b strings.Builder
	b.WriteString("| engine | name in the scripts | newest engine API | how `scripts/engines.sh` gets it | in `make check` | CDI devices (`--device rdma-macvlan/hca=NAME`) | `gid_check=strict` holds the start | no gateway reserved without `--gateway` (GwAllocCheck) | interface name from `com.docker.network.endpoint.ifname` |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	yes := func(v bool, no string) string {
		if v {
			return "yes"
		}
		return no
	}
	for _, e := range All {
		var build string
		switch e.Build {
		case Debian:
			build = "Debian 12's `docker.io` package"
		case DockerSource:
			build = fmt.Sprintf("built from `%s@%s` with its `vendor.mod` (`%s`)", e.Module, e.Version, e.VersionEnv)
		case MobySource:
			build = fmt.Sprintf("built from `%s@%s` (`%s`)", e.Module, e.Version, e.VersionEnv)
		}
		role := map[Role]string{
			RoleOldest:   "yes, every suite",
			RoleNewest:   "yes, every suite",
			RoleMiddle:   "yes: the managed plugin, a subset of the differential scenarios",
			RoleOnDemand: fmt.Sprintf("no: `make e2e-%s`", e.Name),
		}[e.Role]
		cdi := map[CDI]string{
			NoCDI:      "no: the device nodes are passed",
			CDIFlag:    "with `{\"features\": {\"cdi\": true}}` in `daemon.json`",
			CDIDefault: "yes",
		}[e.CDI]
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %s | %s | %s | %s |\n", e.Title, e.Name, e.API, build, role, cdi,
			yes(e.Strict, "no: acts as `warn`, and says so"), yes(e.GatewayCheck, "no: the first address is reserved"), yes(e.Ifname, "no: `eth0`"))
	}
	return b.String()
}
