package cniconf

import (
	"context"
	"path"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// listArgs are cni/list's: the directory it lists.
type listArgs struct{ Dir string }

// listScript lists dir on a node for FromListing.
func listScript(dir string) scripts.Script { return scripts.Render("cni/list", listArgs{Dir: dir}) }

// ReadNode reads, over SSH, the network a node's runtime would load, and
// why there is none; ok is false when the directory could not be listed.
func ReadNode(ctx context.Context, c *ssh.Client) (n Network, loadErr error, ok bool) {
	res, err := c.Query(ctx, listScript(ConfDir).String())
	if err != nil {
		return Network{}, nil, false
	}
	n, loadErr = FromListing(res.Stdout, func(name string) ([]byte, error) {
		return c.Read(ctx, path.Join(ConfDir, name))
	})
	return n, loadErr, true
}
