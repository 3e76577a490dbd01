package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/infra/drill"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/roles/impact"
)

func init() {
	subcommands = append(subcommands, newDrillCommand)
}

func newDrillCommand() *cobra.Command {
	var path, layout, fail, stateDir, labDir string
	var repeat, seconds int
	var noBuild, asJSON bool
	var svgPath string
	cmd := &cobra.Command{
		Use:   "drill -f FILE --layout L --fail NODE [--repeat N] [--seconds S]",
		Short: "In the emulated homelab: build the cluster in a layout, power a node off, measure what compare predicts, power it on, measure recovery",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repeat < 1 || seconds < 1 {
				return &exitError{code: 2, err: fmt.Errorf("--repeat and --seconds must be at least 1")}
			}
			l, err := lab.Open(labDir)
			if err != nil {
				return err
			}
			if _, err := l.LoadState(); err != nil {
				return fmt.Errorf("the emulated homelab is not up (homelab lab up -f %s): %w", path, err)
			}
			if stateDir == "" {
				stateDir = stack.DefaultStateDir()
			}
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				return err
			}
			invPath, inv, err := drill.LayoutInventory(path, layout, stateDir)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if _, ok := inv.Node(fail); !ok {
				return &exitError{code: 1, err: fmt.Errorf("--fail: %q is not a node of %s", fail, path)}
			}
			if os.Getenv(ssh.NetnsEnv) == "" {
				os.Setenv(ssh.NetnsEnv, "/run/netns/"+lab.GatewayNetns)
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			out := cmd.OutOrStdout()
			var s *stack.Stack
			if noBuild {
				s, err = stack.Open(ctx, stack.Options{Inventory: invPath, StateDir: stateDir, Progress: cmd.ErrOrStderr()})
			} else {
				fmt.Fprintf(out, "building the cluster in the %s layout...\n", layout)
				s, err = drill.Build(ctx, l, invPath, stateDir, cmd.ErrOrStderr())
			}
			if err != nil {
				return err
			}
			pred, err := impact.ForInventory(s.Inv, s.Bundle)
			if err != nil {
				return err
			}
			var failovers []time.Duration
			var results []*drill.Result
			for i := range repeat {
				r, err := drill.Run(ctx, drill.Options{Lab: l, Inventory: s.Inv, Bundle: s.Bundle, Fail: fail, Window: time.Duration(seconds) * time.Second, Recover: true})
				if r != nil {
					results = append(results, r)
				}
				if err != nil {
					return fmt.Errorf("drill %d: %w", i+1, err)
				}
				if !asJSON {
					fmt.Fprintf(out, "\n=== drill %d/%d\n", i+1, repeat)
					drill.WriteTimeline(out, r)
					for _, o := range pred.Outcomes {
						if o.Failure.Kind == impact.FailOff && len(o.Failure.Nodes) == 1 && o.Failure.Nodes[0] == fail {
							ms := drill.Compare(o, pred.Consumers, r)
							fmt.Fprintf(out, "compare's prediction: %d cell(s) differ\n", len(ms))
							for _, m := range ms {
								fmt.Fprintf(out, "  %s: predicted %s, measured %s\n", m.Consumer, m.Predicted, m.Measured)
							}
						}
					}
				}
				if r.VIPFailover > 0 {
					failovers = append(failovers, r.VIPFailover)
				}
			}
			if svgPath != "" {
				f, err := os.Create(svgPath)
				if err != nil {
					return err
				}
				if err := drill.WriteSVG(f, results); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(results)
			}
			if len(failovers) > 0 {
				sort.Slice(failovers, func(i, j int) bool { return failovers[i] < failovers[j] })
				fmt.Fprintf(out, "\nVIP failover over %d drill(s): min %.2f s, p50 %.2f s, max %.2f s\n", len(failovers),
					failovers[0].Seconds(), failovers[(len(failovers)-1)/2].Seconds(), failovers[len(failovers)-1].Seconds())
			}
			return nil
		},
	}
	addFileFlag(cmd, &path)
	cmd.Flags().StringVar(&layout, "layout", "vip", "endpoint layout to build: vip, single-ip or dns")
	cmd.Flags().StringVar(&fail, "fail", "", "node to power off")
	_ = cmd.MarkFlagRequired("fail")
	cmd.Flags().IntVar(&repeat, "repeat", 1, "drills in a row (the node is powered on and recovery awaited between them)")
	cmd.Flags().IntVar(&seconds, "seconds", 15, "seconds to sample after each power-off")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "Pulumi state (default "+stack.DefaultStateDir()+")")
	cmd.Flags().StringVar(&labDir, "lab-dir", "", "the emulated homelab's directory (default $"+lab.EnvDir+" or "+lab.DefaultDir+")")
	cmd.Flags().BoolVar(&noBuild, "no-build", false, "drill the cluster as it is (built in --layout already)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the measurements as JSON")
	cmd.Flags().StringVar(&svgPath, "svg", "", "also plot the drills' timelines to this SVG file")
	return cmd
}
