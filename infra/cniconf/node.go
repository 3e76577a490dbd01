package cniconf

import (
	"context"
	"path"

	"github.com/homelab-dev/homelab/infra/ssh"
)

// ReadNode reads, over SSH, the network a node's runtime would load, and
// why there is none; ok is false when the directory could not be listed.
func ReadNode(ctx context.Context, c *ssh.Client) (n Network, loadErr error, ok bool) {
	res, err := c.Query(ctx, ListCommand)
	if err != nil {
		return Network{}, nil, false
	}
	n, loadErr = FromListing(res.Stdout, func(name string) ([]byte, error) {
		return c.Read(ctx, path.Join(ConfDir, name))
	})
	return n, loadErr, true
}
