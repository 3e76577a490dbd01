package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/infra/impact"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/lab/drill"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

// drillReport is one drill in --json: the measurements, the prediction
// and every cell compared.
type drillReport struct {
	Result     *drill.Result  `json:"result"`
	Predicted  impact.Outcome `json:"predicted"`
	Checks     []drill.Check  `json:"checks"`
	Mismatches int            `json:"mismatches"`
}

func newDrillCommand(labDir *string) *cobra.Command {
	var path, layout, fail, how, stateDir string
	var repeat, seconds int
	var noBuild, asJSON bool
	var svgPath string
	cmd := &cobra.Command{
		Use:   "drill -f FILE --layout L --fail NODE[,NODE2]|all [--how power-off|cut|keepalived|apiserver] [--repeat N] [--seconds S]",
		Short: "In the emulated homelab: build the cluster in a layout, fail nodes as compare predicts, measure, undo, measure recovery and the VIP's handback",
		Long: `drill builds the cluster in the layout, then for each failure (one node or
two, or "--fail all": every failure compare lists for the layout):

  power-off   the node's plug pulled: every process and address gone
  cut         its network link down: every process keeps running, alone
  keepalived  every keepalived process SIGKILLed (no goodbye advert)
  apiserver   kube-apiserver.yaml moved out of /etc/kubernetes/manifests
              (the kubelet stops it; keepalived's track script moves the VIP)

it samples every consumer of the API from where it runs, etcd, writes,
the Nodes, the endpoint and the VIP's holders for --seconds, undoes the
failure (power-on, link up, keepalived started, the manifest back), waits
until everything answers and the VIP has settled, and compares every cell
with compare's prediction. It exits 1 when any cell differs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repeat < 1 || seconds < 1 {
				return command.Exit(2, fmt.Errorf("--repeat and --seconds must be at least 1"))
			}
			var one impact.Failure
			if fail != "all" {
				var err error
				if one, err = drill.ParseFailure(fail, how); err != nil {
					return command.Exit(2, err)
				}
			}
			if stateDir == "" {
				stateDir = stack.DefaultStateDir()
			}
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				return err
			}
			invPath, inv, err := drill.LayoutInventory(path, layout, stateDir)
			if err != nil {
				return command.Exit(1, err)
			}
			// Every failure is checked before any machine changes; where
			// anything dials does not depend on the certificates.
			throwaway, err := pki.New()
			if err != nil {
				return err
			}
			shape, err := impact.ReadInventory(inv, throwaway)
			if err != nil {
				return err
			}
			failures := []impact.Failure{one}
			if fail == "all" {
				failures = shape.Failures()
			}
			for _, f := range failures {
				if err := shape.Check(f); err != nil {
					return command.Exit(1, fmt.Errorf("--fail %s --how %s: %w", fail, how, err))
				}
			}
			l, err := lab.Open(*labDir)
			if err != nil {
				return err
			}
			st, err := l.LoadState()
			if err != nil {
				return fmt.Errorf("the emulated homelab is not up (homelab-lab up -f %s): %w", path, err)
			}
			if os.Getenv(ssh.NetnsEnv) == "" {
				os.Setenv(ssh.NetnsEnv, st.Names().GatewayPath())
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			// With --json, stdout carries the JSON alone.
			out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
			report := out
			if asJSON {
				report = io.Discard
			}
			var s *stack.Stack
			if noBuild {
				s, err = stack.Open(ctx, stack.Options{Inventory: invPath, StateDir: stateDir, Progress: progress})
			} else {
				fmt.Fprintf(progress, "building the cluster in the %s layout...\n", layout)
				s, err = drill.Build(ctx, l, invPath, stateDir, progress)
			}
			if err != nil {
				return err
			}
			cl, err := impact.ReadInventory(s.Inv, s.Bundle)
			if err != nil {
				return err
			}
			before := ""
			if s.Inv.Cluster.Endpoint.Layout == inventory.LayoutVIP {
				before = cl.InitialHolder()
			}
			var reports []drillReport
			var results []*drill.Result
			differ := 0
			for _, f := range failures {
				want := cl.Evaluate(f)
				for i := range repeat {
					fmt.Fprintf(progress, "\n=== %s layout, %s (%d/%d)\n", layout, f.ID, i+1, repeat)
					r, err := drill.RunSettled(ctx, drill.Options{
						Lab: l, Inventory: s.Inv, Bundle: s.Bundle, Failure: f,
						Window: time.Duration(seconds) * time.Second, Recover: true,
						VIPBefore: before, VIPAfter: want.VIPAfter, Progress: progress,
					}, 3*time.Minute)
					if r != nil {
						results = append(results, r)
					}
					if err != nil {
						return fmt.Errorf("%s, drill %d: %w", f.ID, i+1, err)
					}
					checks := drill.Compare(want, cl.Consumers, r)
					ms := len(drill.Mismatches(checks))
					if ms > 0 {
						differ++
					}
					reports = append(reports, drillReport{Result: r, Predicted: want, Checks: checks, Mismatches: ms})
					fmt.Fprintf(report, "\n=== drill %s (%d/%d)\n", f.ID, i+1, repeat)
					drill.WriteTimeline(report, r)
					fmt.Fprintln(report)
					drill.WriteComparison(report, want, checks)
				}
			}
			figs := drill.Summarize(results)
			if len(results) > 1 {
				summary := report
				if asJSON {
					summary = progress
				}
				fmt.Fprintln(summary)
				drill.WriteSummary(summary, figs)
			}
			if svgPath != "" {
				if err := createFile(svgPath, func(w io.Writer) error { return drill.WriteSVG(w, results) }); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(struct {
					Drills  []drillReport   `json:"drills"`
					Figures []drill.Figures `json:"figures"`
				}{reports, figs}); err != nil {
					return err
				}
			}
			if differ > 0 {
				return command.Exit(1, fmt.Errorf("%d of %d drills differ from compare's prediction", differ, len(reports)))
			}
			return nil
		},
	}
	command.FileFlag(cmd, &path)
	cmd.Flags().StringVar(&layout, "layout", "vip", "endpoint layout to build: vip, single-ip or dns")
	cmd.Flags().StringVar(&fail, "fail", "", `node to fail, two as NODE1,NODE2, or "all": every failure compare lists`)
	_ = cmd.MarkFlagRequired("fail")
	cmd.Flags().StringVar(&how, "how", "power-off", "power-off, cut, keepalived or apiserver")
	cmd.Flags().IntVar(&repeat, "repeat", 1, "drills of each failure in a row (undone and recovered between them)")
	cmd.Flags().IntVar(&seconds, "seconds", 15, "seconds to sample after each failure (Nodes turn NotReady after about 50)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "Pulumi state (default "+stack.DefaultStateDir()+")")
	cmd.Flags().BoolVar(&noBuild, "no-build", false, "drill the cluster as it is (built in --layout already)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the drills, predictions and figures as JSON on stdout (progress on stderr)")
	cmd.Flags().StringVar(&svgPath, "svg", "", "also plot the drills' timelines to this SVG file")
	return cmd
}

func createFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
