package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/infra/etcdbackup"
)

// isOffsite says whether --from names a copy in the bucket.
func isOffsite(from string) bool { return strings.HasPrefix(from, "s3://") }

// snapshotToOffsite is `etcd snapshot --to s3`: a node's scheduled
// snapshot run now, its copy downloaded back from the bucket and checked,
// kept in dir when given.
func snapshotToOffsite(ctx context.Context, cmd *cobra.Command, t etcdbackup.Target, from, dir string, start time.Time) error {
	keep := dir != ""
	if !keep {
		var err error
		if dir, err = os.MkdirTemp("", "homelab-offsite-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	o, err := etcdbackup.SnapshotOffsite(ctx, t, from, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s copied by %s: good (downloaded back and checked)\n", o.URL, o.Node)
	if keep {
		writeSnapshotReport(cmd.OutOrStdout(), o.Path, o.Meta, time.Since(start))
	} else {
		m := o.Meta
		fmt.Fprintf(cmd.OutOrStdout(), "  revision  %d\n  keys      %d\n  size      %d bytes\n  sha256    %s\ntook %s\n", m.Revision, m.TotalKeys, m.Size, m.SHA256, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
