// Package compose turns a Compose project, as `docker compose config
// --format json` prints it after merging the user's files, into the override
// file that gives every service on an rdma-macvlan network what `docker rdma
// run` gives a container: its HCAs' devices, CAP_IPC_LOCK, a locked-memory
// limit and rdma-exec in front of its entrypoint and command. It also reads
// the command line of `docker rdma compose`. It asks nothing of Docker
// itself: what only the engine or the plugin knows (which networks are
// rdma-macvlan, their HCAs and devices, an image's entrypoint) comes
// through a Resolver.
package compose

import (
	"encoding/json"
	"fmt"
)

// Model is the part of the merged Compose model the override depends on.
type Model struct {
	Name     string                    `json:"name"`
	Services map[string]Service        `json:"services"`
	Networks map[string]ProjectNetwork `json:"networks"`
}

// Service is one service of the model.
type Service struct {
	Image string `json:"image"`
	// Build is set when compose builds the image.
	Build json.RawMessage `json:"build,omitempty"`
	// PullPolicy is pull_policy: always, missing, never, build, ...
	PullPolicy string `json:"pull_policy,omitempty"`
	// Entrypoint and Command are nil when the service does not set them,
	// non-nil (maybe empty) when it does: compose prints null for unset.
	Entrypoint  []string                   `json:"entrypoint"`
	Command     []string                   `json:"command"`
	NetworkMode string                     `json:"network_mode,omitempty"`
	Networks    map[string]*ServiceNetRef  `json:"networks,omitempty"`
	Devices     []Device                   `json:"devices,omitempty"`
	CapAdd      []string                   `json:"cap_add,omitempty"`
	CapDrop     []string                   `json:"cap_drop,omitempty"`
	Privileged  bool                       `json:"privileged,omitempty"`
	Ulimits     map[string]json.RawMessage `json:"ulimits,omitempty"`
	Volumes     []Volume                   `json:"volumes,omitempty"`
	User        string                     `json:"user,omitempty"`
}

// ServiceNetRef is a service's attachment to one of the project's
// networks (nil in the model when it sets nothing).
type ServiceNetRef struct {
	Priority int `json:"priority,omitempty"`
}

// Device is a service's device mapping (a node, or a CDI name as source
// and target).
type Device struct {
	Source string `json:"source"`
	Target string `json:"target,omitempty"`
}

// Volume is a service's mount.
type Volume struct {
	Type   string `json:"type"`
	Source string `json:"source,omitempty"`
	Target string `json:"target"`
}

// ProjectNetwork is one of the project's networks: Name is the engine's name for
// it (the project's prefix added unless the file names it).
type ProjectNetwork struct {
	Name       string            `json:"name"`
	Driver     string            `json:"driver,omitempty"`
	DriverOpts map[string]string `json:"driver_opts,omitempty"`
	External   bool              `json:"external,omitempty"`
	IPAM       struct {
		Config []struct {
			Subnet string `json:"subnet,omitempty"`
		} `json:"config,omitempty"`
	} `json:"ipam"`
}

// Decode reads the output of `docker compose config --format json`.
func Decode(b []byte) (*Model, error) {
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read the output of docker compose config --format json: %w", err)
	}
	return &m, nil
}
