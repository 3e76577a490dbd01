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
	url, node, err := etcdbackup.SnapshotOffsite(ctx, t, from)
	if err != nil {
		return err
	}
	keep := dir != ""
	if !keep {
		if dir, err = os.MkdirTemp("", "homelab-offsite-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	path, _, meta, err := etcdbackup.FetchOffsite(ctx, t, url, dir)
	if err != nil {
		return fmt.Errorf("%s copied %s, which does not check out: %w", node, url, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s copied by %s: good (downloaded back and checked)\n", url, node)
	if keep {
		writeSnapshotReport(cmd.OutOrStdout(), path, meta, time.Since(start))
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "  revision  %d\n  keys      %d\n  size      %d bytes\n  sha256    %s\ntook %s\n", meta.Revision, meta.TotalKeys, meta.Size, meta.SHA256, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
