// Package compose turns a Compose project, as `docker compose config
// --format json` prints it after merging the user's files, into the override
// file that hands every service on an rdma-macvlan network to the
// rdma-macvlan runtime (runtime: rdma-macvlan), which gives its containers
// what RDMA needs. It also reads the command line of `docker rdma compose`.
// It asks nothing of Docker itself: which networks are rdma-macvlan comes
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

// Service is one service of the model: where its network namespace comes
// from.
type Service struct {
	NetworkMode string                    `json:"network_mode,omitempty"`
	Networks    map[string]*ServiceNetRef `json:"networks,omitempty"`
}

// ServiceNetRef is a service's attachment to one of the project's
// networks (nil in the model when it sets nothing).
type ServiceNetRef struct {
	Priority int `json:"priority,omitempty"`
}

// ProjectNetwork is one of the project's networks: Name is the engine's name for
// it (the project's prefix added unless the file names it).
type ProjectNetwork struct {
	Name     string `json:"name"`
	Driver   string `json:"driver,omitempty"`
	External bool   `json:"external,omitempty"`
}

// Decode reads the output of `docker compose config --format json`.
func Decode(b []byte) (*Model, error) {
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read the output of docker compose config --format json: %w", err)
	}
	return &m, nil
}
