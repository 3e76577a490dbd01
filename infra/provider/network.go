package provider

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/homelab-dev/homelab/infra/helmrelease"
	"github.com/homelab-dev/homelab/infra/readiness"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/cilium"
)

// The pod network: Cilium's agents on every node, each writing the CNI
// configuration its node's runtime needs before the kubelet reports the
// Node Ready.

// apiClient reaches the API through the SSH connection with the node's
// admin.conf.
func apiClient(ctx context.Context, c ssh.Executor, node string) (kubernetes.Interface, error) {
	kc, err := c.Read(ctx, adminConf)
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", node, adminConf, err)
	}
	cfg, _, err := helmrelease.RESTConfig(kc, c.DialContext)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// networkNotReady lists the declared nodes whose Ready condition says the
// runtime's network is not ready.
func networkNotReady(nodes []corev1.Node, want []string) []string {
	var out []string
	for _, name := range want {
		if readiness.NoNetwork(readiness.NotReady(nodes, name)) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// agentsRolledOut says whether the agent DaemonSet runs its current
// template, ready, on every node it targets, and if not, how far it is.
// Stricter than Helm's wait, which accepts maxUnavailable agents down.
func agentsRolledOut(ds *appsv1.DaemonSet) (bool, string) {
	s := ds.Status
	desc := fmt.Sprintf("%d of %d agents ready, %d updated", s.NumberReady, s.DesiredNumberScheduled, s.UpdatedNumberScheduled)
	switch {
	case s.ObservedGeneration < ds.Generation:
		return false, "the DaemonSet controller has not seen the new template yet"
	case s.DesiredNumberScheduled == 0:
		return false, "no node to run agents on yet"
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberReady < s.DesiredNumberScheduled || s.NumberUnavailable > 0:
		return false, desc
	}
	return true, desc
}

// podProblem is why a pod is not ready, as kubectl describe would show it.
func podProblem(pod *corev1.Pod) string {
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "PodInitializing" {
			msg := w.Reason
			if w.Message != "" {
				msg += ": " + w.Message
			}
			if t := cs.LastTerminationState.Terminated; t != nil && t.Message != "" {
				msg += " (last exit: " + t.Message + ")"
			}
			return msg
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			return "unschedulable: " + c.Message
		}
	}
	return string(pod.Status.Phase)
}

// kubeProxyLabel selects kubeadm's kube-proxy pods.
const kubeProxyLabel = "k8s-app=kube-proxy"

// networkStatus checks the pod network: every agent of the current
// template ready and every declared node Ready; with kubeProxy (it serves
// Services), its DaemonSet rolled out and its pod ready on every declared
// node, since a crash-looping kube-proxy leaves the node Ready while no
// Service answers on it. It returns the problems, one per line, none when
// the network is up.
func networkStatus(ctx context.Context, cs kubernetes.Interface, ns string, want []string, kubeProxy bool) ([]string, error) {
	var problems []string
	ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, cilium.AgentDaemonSet, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		problems = append(problems, "no "+ns+"/"+cilium.AgentDaemonSet+" DaemonSet")
	case err != nil:
		return nil, err
	default:
		if ok, desc := agentsRolledOut(ds); !ok {
			problems = append(problems, "Cilium agents: "+desc)
		}
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: cilium.AgentLabel})
	if err != nil {
		return nil, err
	}
	for _, name := range want {
		why := readiness.NotReady(nodes.Items, name)
		if why == "" {
			continue
		}
		agent := "no Cilium agent pod on it"
		if pod := podOn(pods.Items, name); pod != nil {
			agent = "its Cilium agent " + pod.Name + ": " + podProblem(pod)
		}
		problems = append(problems, fmt.Sprintf("%s: %s; %s", name, why, agent))
	}
	if !kubeProxy {
		return problems, nil
	}
	ds, err = cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, "kube-proxy", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return append(problems, "no kube-system/kube-proxy DaemonSet"), nil
	case err != nil:
		return nil, err
	}
	if ok, desc := agentsRolledOut(ds); !ok {
		problems = append(problems, "kube-proxy: "+strings.Replace(desc, "agents", "pods", 1))
	}
	kp, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: kubeProxyLabel})
	if err != nil {
		return nil, err
	}
	for _, name := range want {
		pod := podOn(kp.Items, name)
		switch {
		case pod == nil:
			problems = append(problems, name+": no kube-proxy pod on it")
		case !podutils.IsPodReady(pod):
			problems = append(problems, fmt.Sprintf("%s: kube-proxy %s: %s", name, pod.Name, podProblem(pod)))
		}
	}
	return problems, nil
}

// podOn is the pod of pods bound to node that is not being deleted.
func podOn(pods []corev1.Pod, node string) *corev1.Pod {
	for i := range pods {
		if pods[i].Spec.NodeName == node && pods[i].DeletionTimestamp == nil {
			return &pods[i]
		}
	}
	return nil
}

// waitNetwork waits until the pod network is up (networkStatus), and
// otherwise fails naming every node that is not Ready with its own
// condition and its agent's state.
func waitNetwork(ctx context.Context, c ssh.Executor, in DataplaneArgs) error {
	cs, err := apiClient(ctx, c, in.Via.Node)
	if err != nil {
		return err
	}
	var want []string
	for _, n := range in.Nodes {
		want = append(want, n.Node)
	}
	log := p.GetLogger(ctx)
	deadline := time.Now().Add(in.timeout())
	var last []string
	for {
		problems, err := networkStatus(ctx, cs, in.Namespace, want, in.ciliumCNI() && !in.cilium())
		if err == nil && len(problems) == 0 {
			log.Infof("pod network up: Cilium's agents ready, %d nodes Ready%s", len(want), map[bool]string{true: ", kube-proxy ready on each"}[in.ciliumCNI() && !in.cilium()])
			return nil
		}
		if err != nil {
			problems = []string{err.Error()}
		}
		if !slices.Equal(problems, last) {
			log.Infof("waiting for the pod network: %s", strings.Join(problems, "; "))
			last = problems
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the pod network is not up after %s:\n  %s", in.timeout(), strings.Join(problems, "\n  "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// joinedNodeReady is the Ready condition of a node, as "STATUS REASON:
// MESSAGE" ("" when there is no Node of that name yet).
func joinedNodeReady(node string) scripts.Script {
	return scripts.Render("dataplane/node-ready", nodeArgs{Kubectl: kubectl, Node: node})
}

type agentsArgs struct{ Kubectl, Namespace, DaemonSet string }

// awaitJoinedNetwork waits, after node joined a cluster whose pod network
// runs already (a replaced machine re-joined, a node added, a restore's
// re-join), until the Node is Ready: its Cilium agent has to start and
// write the CNI configuration first, and until then the kubelet reports
// NetworkPluginNotReady. Without this wait the up's verify failed a
// rebuild that was seconds from done. On a fresh build the network is
// installed after every join, and Dataplane waits for every node then;
// with cni: none there is no agent of ours to wait for. cl is a
// control-plane node whose admin.conf the API answers to.
func awaitJoinedNetwork(ctx context.Context, cl ssh.Executor, clNode, node string) error {
	pr := configOf(ctx).probes
	deadline := time.Now().Add(pr.network)
	if agents, err := runsAgents(ctx, cl, clNode); err != nil || !agents {
		return err
	}
	log := p.GetLogger(ctx)
	last := ""
	for {
		out, code, err := query(ctx, cl, joinedNodeReady(node))
		cond := strings.TrimSpace(out)
		switch {
		case err != nil:
			cond = err.Error()
		case code != 0:
			cond = fmt.Sprintf("reading Node %s failed (exit %d)", node, code)
		case strings.HasPrefix(cond, "True "):
			log.Infof("%s: Ready, its pod network up", node)
			return nil
		case cond == "":
			cond = "no Node " + node + " registered yet"
		}
		if cond != last {
			log.Infof("%s joined; waiting for its pod network: %s", node, cond)
			last = cond
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s joined, but its Node is not Ready after %s (%s): its Cilium agent (kubectl -n %s get pods -l %s -o wide) has not set up its pod network",
				node, pr.network, cond, cilium.Namespace, cilium.AgentLabel)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pr.poll):
		}
	}
}

// runsAgents says whether the cluster runs Cilium's agent DaemonSet,
// asking again while the endpoint does not answer for a moment.
func runsAgents(ctx context.Context, cl ssh.Executor, clNode string) (bool, error) {
	agents := scripts.Render("dataplane/agents", agentsArgs{Kubectl: kubectl, Namespace: cilium.Namespace, DaemonSet: cilium.AgentDaemonSet})
	r, err := outliveBlips(ctx, func() (ssh.Result, error) {
		return cl.Query(ctx, agents.String())
	})
	if err == nil && r.ExitCode != 0 {
		err = &apiRefused{code: r.ExitCode, reason: tail(strings.TrimSpace(redact(string(r.Stderr))), 1)}
	}
	if err != nil {
		return false, fmt.Errorf("%s: reading the %s/%s DaemonSet: %w", clNode, cilium.Namespace, cilium.AgentDaemonSet, err)
	}
	return strings.TrimSpace(string(r.Stdout)) != "", nil
}

// restartAgents deletes the Cilium agent pods on nodes: their DaemonSet
// starts new ones, which write the CNI configuration again.
func restartAgents(ctx context.Context, c ssh.Executor, in DataplaneArgs, nodes []string) error {
	cs, err := apiClient(ctx, c, in.Via.Node)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		pods, err := cs.CoreV1().Pods(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: cilium.AgentLabel, FieldSelector: "spec.nodeName=" + n})
		if err != nil {
			return err
		}
		p.GetLogger(ctx).Warningf("%s: its container runtime has no pod network (no CNI configuration): restarting its Cilium agent, which writes %s", n, cilium.ConfigFile)
		for _, pod := range pods.Items {
			if err := c.Note("delete pod " + in.Namespace + "/" + pod.Name); err != nil {
				return err
			}
			if err := cs.CoreV1().Pods(in.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: restarting Cilium agent %s: %w", n, pod.Name, err)
			}
		}
	}
	return nil
}
