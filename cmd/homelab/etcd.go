package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/infra/clusterlock"
	"github.com/homelab-dev/homelab/infra/etcdbackup"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/roles/pki"
)

func init() {
	subcommands = append(subcommands, newEtcdCommand)
}

func newEtcdCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Save, fetch and restore the cluster's etcd data",
	}
	cmd.AddCommand(newEtcdSnapshotCommand(), newEtcdRestoreCommand(), newEtcdRejoinCommand())
	return cmd
}

// etcdTarget loads the inventory, the bundle and the SSH key a command on
// etcd needs, as doctor does.
func etcdTarget(cmd *cobra.Command, f stackFlags) (etcdbackup.Target, error) {
	inv, err := loadInventory(f.inventory, cmd.ErrOrStderr())
	if err != nil {
		return etcdbackup.Target{}, err
	}
	name := f.stack
	if name == "" {
		name = inv.Cluster.Name
	}
	secrets := f.secrets
	if secrets == "" {
		secrets = stack.BundlePath(f.stateDir, name)
	}
	data, err := os.ReadFile(secrets)
	if err != nil {
		return etcdbackup.Target{}, fmt.Errorf("the secrets bundle (the cluster's CAs): %w (pass --secrets)", err)
	}
	bundle, err := pki.Parse(data)
	if err != nil {
		return etcdbackup.Target{}, err
	}
	key, err := inv.SSH.ReadPrivateKey()
	if err != nil {
		return etcdbackup.Target{}, err
	}
	return etcdbackup.Target{Inventory: inv, Bundle: bundle, PrivateKey: key, KnownHosts: inv.SSH.KnownHosts,
		Dial: ssh.DialFunc(dialer()), CommandLog: commandLog(),
		History: filepath.Join(filepath.Dir(stack.BundlePath(f.stateDir, name)), etcdbackup.HistoryFile), Log: cmd.ErrOrStderr()}, nil
}

func newEtcdSnapshotCommand() *cobra.Command {
	var f stackFlags
	var out, from, to string
	var fetch bool
	cmd := &cobra.Command{
		Use:   "snapshot -f FILE -o SNAPSHOT [--from NODE] | --fetch [-o PATH] | --to s3 [-o DIR] [--from NODE]",
		Short: "Save a consistent snapshot of etcd through a healthy member (or --fetch the newest scheduled one off the nodes), checked before it is reported good",
		Long: "Streams a snapshot from the first control-plane node (or --from) whose etcd member is healthy, through an SSH tunnel to its " +
			"loopback client port, into a temporary file beside SNAPSHOT; opens it as etcdutl snapshot status does (its embedded SHA-256, " +
			"bbolt's consistency check, etcd's buckets, the cluster CA its data publishes), then renames it into place with SNAPSHOT.json " +
			"(revision, members, cluster ID, CAs, SHA-256) and SNAPSHOT.sha256 beside it. With --fetch, copies the newest snapshot the nodes' " +
			"timers saved (cluster.etcd.snapshots) and checks it the same way. Changes nothing on any node. With --to s3, runs a node's " +
			"scheduled snapshot now (its own script: saved on the node, copied to the off-site bucket, pruned), then downloads the copy " +
			"back from the bucket and checks it the same way (kept in -o DIR when given).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to != "" && to != "s3" {
				return fmt.Errorf("--to %s: the one destination is s3 (the inventory's cluster.etcd.snapshots.s3)", to)
			}
			if to != "" && fetch {
				return fmt.Errorf("--to s3 or --fetch: a new off-site copy, or the newest on the nodes")
			}
			if !fetch && to == "" && out == "" {
				return fmt.Errorf("-o SNAPSHOT: where to write the snapshot")
			}
			t, err := etcdTarget(cmd, f)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Minute)
			defer cancel()
			start := time.Now()
			if to != "" {
				return snapshotToOffsite(ctx, cmd, t, from, out, start)
			}
			var meta *etcdbackup.Metadata
			path := out
			if fetch {
				meta, path, err = etcdbackup.Fetch(ctx, t, out)
			} else {
				meta, err = etcdbackup.Take(ctx, t, out, from)
			}
			if err != nil {
				return err
			}
			writeSnapshotReport(cmd.OutOrStdout(), path, meta, time.Since(start))
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "", "the snapshot file to write (with --fetch: a file or a directory, default the current one)")
	cmd.Flags().StringVar(&from, "from", "", "control-plane node to take the snapshot through (default: the first whose member is healthy)")
	cmd.Flags().BoolVar(&fetch, "fetch", false, "copy the newest scheduled snapshot off the control-plane nodes instead of taking one")
	cmd.Flags().StringVar(&to, "to", "", "s3: run a node's scheduled snapshot now, copying it to the off-site bucket, and check the copy")
	return cmd
}

func writeSnapshotReport(w io.Writer, path string, m *etcdbackup.Metadata, took time.Duration) {
	var members []string
	for _, mb := range m.Members {
		members = append(members, mb.Name+"="+mb.PeerURL)
	}
	fmt.Fprintf(w, "snapshot %s: good (opened and checked)\n", path)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  revision\t%d\n  keys\t%d\n  size\t%d bytes\n  sha256\t%s\n  etcd cluster\t%s\n  members\t%s\n  taken\t%s from %s (member %s)\n  metadata\t%s, %s\n",
		m.Revision, m.TotalKeys, m.Size, m.SHA256, orNone(m.ClusterID), orNone(strings.Join(members, ", ")), m.TakenAt.Format(time.RFC3339), m.Node, orNone(m.MemberID),
		etcdbackup.MetadataPath(path), etcdbackup.SumPath(path))
	tw.Flush()
	fmt.Fprintf(w, "took %s\n", took.Round(time.Millisecond))
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

func newEtcdRestoreCommand() *cobra.Command {
	var f stackFlags
	var o etcdbackup.RestoreOptions
	var skipUp, breakLock, latest bool
	cmd := &cobra.Command{
		Use:   "restore -f FILE --from SNAPSHOT|s3://BUCKET/KEY | --latest | --from-data NODE [--node NODE] [--force]",
		Short: "Bring back a cluster that lost etcd's quorum: restore a snapshot (or a surviving member's db) as a new etcd cluster, re-add the other control-plane nodes, up, verify",
		Long: "Refused, with the reason and nothing changed, while a quorum of etcd's members is healthy (unless --force), for a snapshot that " +
			"does not open, changed since it was taken, or is another cluster's (other CAs, another cluster ID than this cluster ever had), " +
			"and for a bundle whose CAs are not the nodes'. Then: the control plane stopped on every reachable control-plane node (static " +
			"pod manifests moved to " + etcdbackup.AsideDir + ", so no member of the lost cluster starts again); the snapshot restored on " +
			"one node (--node, else the most up-to-date reachable one; with --from-data NODE, that node's own " +
			"/var/lib/etcd/member/snap/db) as a new one-member etcd cluster with a new cluster ID, its revision bumped past the old ones " +
			"and marked compacted, the PKI kept, and started with the apiserver until the endpoint answers; every other set-up " +
			"control-plane node re-added as a fresh member one at a time (its old data moved to " + etcdbackup.BeforeRestoreDir + "); " +
			"blank or replaced machines joined by the up that follows, which then verifies the cluster. With --from s3://BUCKET/KEY " +
			"or --latest (the newest of every node's), the snapshot comes from the off-site bucket (cluster.etcd.snapshots.s3): " +
			"downloaded to this machine and checked against the .sha256 its node wrote first.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if latest && o.From != "" {
				return fmt.Errorf("--latest or --from: the newest off-site copy, or the one named")
			}
			t, err := etcdTarget(cmd, f)
			if err != nil {
				return err
			}
			ctx, cancel := interruptible(cmd.Context(), cmd.ErrOrStderr())
			defer cancel()
			source := "" // the bucket's URL, which the report names rather than the temporary file
			if latest || isOffsite(o.From) {
				dir, err := os.MkdirTemp("", "homelab-offsite-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				path, c, meta, err := etcdbackup.FetchOffsite(ctx, t, o.From, dir)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: taken %s on %s, revision %d, %d bytes: downloaded and checked\n",
					c.URL(t.Inventory.Cluster.Etcd.SnapshotsS3().Bucket), c.TakenAt.Format(time.RFC3339), c.Node, meta.Revision, meta.Size)
				o.From, source = path, c.URL(t.Inventory.Cluster.Etcd.SnapshotsS3().Bucket)
			}
			return withClusterLock(ctx, cmd, t.Inventory, clusterlock.Options{Break: breakLock, Reachable: true}, func() error {
				rep, err := etcdbackup.Restore(ctx, t, o)
				if rep != nil && source != "" {
					rep.Source = source
				}
				if rep != nil && rep.NewClusterID != "" {
					writeRestoreReport(cmd.OutOrStdout(), rep)
				}
				if err != nil {
					return err
				}
				if skipUp {
					fmt.Fprintf(cmd.OutOrStdout(), "\nnext: homelab up -f %s (joins %s and verifies)\n", f.inventory, orNone(strings.Join(rep.Rejoin, ", ")))
					warnUnreachable(cmd.OutOrStdout(), f.inventory, rep)
					return nil
				}
				s, err := stack.Open(ctx, stack.Options{Inventory: f.inventory, Secrets: f.secrets, StateDir: f.stateDir, Backend: f.state, Stack: f.stack, Progress: cmd.OutOrStdout()})
				if err != nil {
					return err
				}
				start := time.Now()
				res, err := s.Up(ctx, true)
				if err != nil {
					return fmt.Errorf("the restored cluster runs; the up after it failed (run homelab up -f %s again): %w", f.inventory, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "\nup after the restore took %s: %v\n", time.Since(start).Round(time.Millisecond), *res.Summary.ResourceChanges)
				warnUnreachable(cmd.OutOrStdout(), f.inventory, rep)
				return verifyAndReport(ctx, cmd, s, res.Outputs)
			})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&o.From, "from", "", "the snapshot file to restore (homelab etcd snapshot's, with its .json beside it), or s3://BUCKET/KEY in the off-site bucket")
	cmd.Flags().BoolVar(&latest, "latest", false, "restore the newest snapshot in the off-site bucket (cluster.etcd.snapshots.s3)")
	cmd.Flags().StringVar(&o.FromData, "from-data", "", "restore the raw db of this control-plane node's etcd member instead (no snapshot; --skip-hash-check)")
	cmd.Flags().StringVar(&o.Node, "node", "", "control-plane node the restored cluster starts on (default: the most up-to-date reachable one)")
	cmd.Flags().BoolVar(&o.Force, "force", false, "restore though a quorum of etcd's members is healthy (their newer data is lost)")
	cmd.Flags().BoolVar(&skipUp, "skip-up", false, "stop after the restore and the re-added members; run up yourself")
	addBreakLockFlag(cmd, &breakLock)
	return cmd
}

func writeRestoreReport(w io.Writer, r *etcdbackup.RestoreReport) {
	var members []string
	for _, m := range r.Members {
		members = append(members, m.Name+"="+m.PeerURL)
	}
	fmt.Fprintf(w, "\nrestored %s at revision %d on %s\n", r.Source, r.Revision, r.Node)
	if r.Seeded {
		fmt.Fprintf(w, "  every control-plane node was blank: the data waits on %s, which up sets up over it (no new cluster is made)\n", r.Node)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  etcd cluster\t%s (was %s)\n  members\t%s\n  re-added\t%s\n  joined by up\t%s\n  unreachable\t%s\n  took\t%s\n",
		r.NewClusterID, orNone(strings.Join(r.OldClusterIDs, ", ")), strings.Join(members, ", "), orNone(strings.Join(r.Readded, ", ")),
		orNone(strings.Join(r.Rejoin, ", ")), orNone(strings.Join(r.Unreachable, ", ")), r.Took.Round(time.Millisecond))
	tw.Flush()
}

func newEtcdRejoinCommand() *cobra.Command {
	var f stackFlags
	var breakLock bool
	cmd := &cobra.Command{
		Use:   "rejoin -f FILE NODE",
		Short: "Make a control-plane node that was off during a restore a fresh member of the restored etcd cluster",
		Long: "A node unreachable during homelab etcd restore keeps its member of the lost cluster, which the restored one refuses (another " +
			"cluster ID). rejoin sets its control plane aside, moves its etcd data to " + etcdbackup.BeforeRestoreDir + ", adds it as a learner " +
			"through a healthy member, starts it with the members listed, promotes it and starts its control plane again.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := etcdTarget(cmd, f)
			if err != nil {
				return err
			}
			ctx, cancel := interruptible(cmd.Context(), cmd.ErrOrStderr())
			defer cancel()
			start := time.Now()
			if err := withClusterLock(ctx, cmd, t.Inventory, clusterlock.Options{Break: breakLock}, func() error {
				return etcdbackup.Rejoin(ctx, t, args[0])
			}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is a member of the running etcd cluster (took %s)\n", args[0], time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f.add(cmd)
	addBreakLockFlag(cmd, &breakLock)
	return cmd
}

func warnUnreachable(w io.Writer, inv string, rep *etcdbackup.RestoreReport) {
	for _, n := range rep.Unreachable {
		fmt.Fprintf(w, "%s was unreachable: its etcd member is of the lost cluster; once it is on: homelab etcd rejoin -f %s %s (or give it a new disk and run up)\n", n, inv, n)
	}
}
