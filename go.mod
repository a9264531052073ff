module github.com/rdma-macvlan/rdma-macvlan

go 1.26.8

require (
	github.com/Mellanox/rdmamap v1.2.0 // indirect
	github.com/docker/go-plugins-helpers v0.0.0-20240701071450-45e2431495c8 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
