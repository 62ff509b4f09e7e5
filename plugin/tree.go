// Package plugin is kubectl-webapp: a WebApp as a tree of its children and pods, each with its state in words
// (get), why it is where it is with the evidence (explain), and who owns each field of them (owners). What it reads
// it reads as the operator does: the children by the operator's own declarations (controller.ChildObjects), the
// pods by the operator's test of which are the WebApp's (controller/pods), their trouble in the operator's words.
// Everything it says is a pure function of what it read (Tree, Explain, Owners), tested with tables; the commands
// (cmd.go) read and print.
package plugin

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/pods"
)

// Snapshot is what get read of one WebApp: the WebApp, its children that exist (in the operator's order), and
// the pods of each of its Deployments (by the Deployment's name).
type Snapshot struct {
	App      *webappv2.WebApp
	Children []client.Object
	Pods     map[string][]*corev1.Pod
	// Others are objects of the children's kinds and names that are not the WebApp's.
	Others []Other
}

// Other is an object of a child's kind and name that the WebApp does not control.
type Other struct {
	Object client.Object
	// Released: the operator let it go (a claim kept with its data, a child of an Orphan deletion).
	Released bool
	// Why is what it is, in words, and what follows.
	Why string
}

// Node is one line of the tree: an object, its state in words, and what it holds.
type Node struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	State string `json:"state"`
	// Details are more lines of the object's state (the WebApp's conditions, say).
	Details  []string `json:"details,omitempty"`
	Children []Node   `json:"children,omitempty"`
}

// Tree is the WebApp of s as a tree: its conditions, then each child with its state, each Deployment with its
// pods, and the canary's state when it has a strategy.
func Tree(s Snapshot) Node {
	app := s.App
	root := Node{Kind: "WebApp", Name: app.Name, State: webAppState(app)}
	for _, c := range app.Status.Conditions {
		root.Details = append(root.Details, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	for _, f := range app.Status.RetainedFields {
		root.Details = append(root.Details, fmt.Sprintf("retained: %s %s, kept by %s", f.Kind, f.Field, strings.Join(f.Managers, ", ")))
	}
	for _, obj := range s.Children {
		n := Node{Kind: kindOf(obj), Name: obj.GetName(), State: childState(obj)}
		if _, ok := obj.(*appsv1.Deployment); ok {
			for _, p := range s.Pods[obj.GetName()] {
				n.Children = append(n.Children, Node{Kind: "Pod", Name: p.Name, State: podState(p)})
			}
		}
		root.Children = append(root.Children, n)
	}
	for _, o := range s.Others {
		root.Children = append(root.Children, Node{Kind: kindOf(o.Object), Name: o.Object.GetName(), State: childState(o.Object) + "; " + o.Why})
	}
	if c := app.Status.Canary; c != nil && app.Spec.Rollout.Canary != nil {
		root.Children = append(root.Children, Node{Kind: "Canary", Name: app.Name, State: canaryState(c, app.Spec.Rollout.Canary)})
	}
	return root
}

// Render writes n as an indented tree, one object a line, its details under it.
func Render(w io.Writer, n Node) error {
	var b strings.Builder
	render(&b, n, "", "", "  ")
	_, err := io.WriteString(w, b.String())
	return err
}

func render(b *strings.Builder, n Node, first, rest, detail string) {
	fmt.Fprintf(b, "%s%s %s: %s\n", first, n.Kind, n.Name, n.State)
	for _, d := range n.Details {
		fmt.Fprintf(b, "%s%s\n", detail, d)
	}
	for i, c := range n.Children {
		if i == len(n.Children)-1 {
			render(b, c, rest+"└── ", rest+"    ", rest+"    │ ")
		} else {
			render(b, c, rest+"├── ", rest+"│   ", rest+"│   │ ")
		}
	}
}

// kindOf is obj's kind: from its type, since a typed object read by a client carries no kind.
func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := fmt.Sprintf("%T", obj)
	return t[strings.LastIndex(t, ".")+1:]
}

// webAppState is the WebApp's first line: its Ready condition and counts.
func webAppState(app *webappv2.WebApp) string {
	ready := meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady)
	words := "not reconciled yet (no Ready condition)"
	if ready != nil {
		words = fmt.Sprintf("Ready=%s (%s)", ready.Status, ready.Reason)
	}
	words += fmt.Sprintf(", %d/%d available", app.Status.AvailableReplicas, app.Status.DesiredReplicas)
	if app.Status.ReplicasSetBy != "" {
		words += ", replicas set by " + app.Status.ReplicasSetBy
	}
	if app.Status.ObservedGeneration != app.Generation {
		words += fmt.Sprintf(", generation %d not yet observed (status is of %d)", app.Generation, app.Status.ObservedGeneration)
	}
	for _, u := range app.Status.URLs {
		words += ", " + u
	}
	return words
}

// childState is a child's state in words.
func childState(obj client.Object) string {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return deploymentState(o)
	case *corev1.Service:
		return serviceState(o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		return hpaState(o)
	case *policyv1.PodDisruptionBudget:
		return fmt.Sprintf("%d disruptions allowed, %d/%d healthy", o.Status.DisruptionsAllowed, o.Status.CurrentHealthy, o.Status.ExpectedPods)
	case *networkingv1.Ingress:
		return ingressState(o)
	case *gwv1.HTTPRoute:
		return routeState(o)
	case *corev1.PersistentVolumeClaim:
		words := string(o.Status.Phase)
		if q, ok := o.Status.Capacity[corev1.ResourceStorage]; ok {
			words += ", " + q.String()
		} else if q, ok := o.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			words += ", requests " + q.String()
		}
		if o.Spec.StorageClassName != nil {
			words += ", class " + *o.Spec.StorageClassName
		}
		return words
	case *appsv1.ControllerRevision:
		return "the stable version's pod template, revision " + o.Annotations[webappv2.AnnotationRevision]
	}
	return "exists"
}

func deploymentState(d *appsv1.Deployment) string {
	var want int32 = 1
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	words := fmt.Sprintf("%d/%d ready, %d updated, %d available", d.Status.ReadyReplicas, want, d.Status.UpdatedReplicas, d.Status.AvailableReplicas)
	if rev := d.Annotations[webappv2.AnnotationRevision]; rev != "" {
		words += ", revision " + rev
	}
	if d.Status.ObservedGeneration < d.Generation {
		words += ", its controller has not seen the latest spec"
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == webappv2.ReasonProgressDeadlineExceeded {
			words += ", progress deadline exceeded"
		}
	}
	return words
}

func serviceState(s *corev1.Service) string {
	words := string(s.Spec.Type)
	if s.Spec.ClusterIP != "" {
		words += " " + s.Spec.ClusterIP
	}
	var ports []string
	for _, p := range s.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s %d→%s", p.Name, p.Port, p.TargetPort.String()))
	}
	if len(ports) > 0 {
		words += ", ports " + strings.Join(ports, ", ")
	}
	return words
}

func hpaState(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var lo int32 = 1
	if h.Spec.MinReplicas != nil {
		lo = *h.Spec.MinReplicas
	}
	words := fmt.Sprintf("%d replicas, wants %d (from %d to %d)", h.Status.CurrentReplicas, h.Status.DesiredReplicas, lo, h.Spec.MaxReplicas)
	for _, m := range h.Status.CurrentMetrics {
		if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
			words += fmt.Sprintf(", %s at %d%%", m.Resource.Name, *m.Resource.Current.AverageUtilization)
		}
	}
	for _, c := range h.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive && c.Status != corev1.ConditionTrue {
			words += fmt.Sprintf(", not scaling (%s)", c.Reason)
		}
	}
	return words
}

func ingressState(i *networkingv1.Ingress) string {
	var urls []string
	scheme := "http"
	if len(i.Spec.TLS) > 0 {
		scheme = "https"
	}
	for _, r := range i.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			urls = append(urls, scheme+"://"+r.Host+p.Path)
		}
	}
	words := strings.Join(urls, ", ")
	if len(i.Status.LoadBalancer.Ingress) == 0 {
		words += " (no address yet)"
	}
	return words
}

func routeState(r *gwv1.HTTPRoute) string {
	var backends []string
	for _, rule := range r.Spec.Rules {
		for _, b := range rule.BackendRefs {
			w := int32(1)
			if b.Weight != nil {
				w = *b.Weight
			}
			backends = append(backends, fmt.Sprintf("%s weight %d", b.Name, w))
		}
	}
	words := "backends " + strings.Join(slices.Compact(backends), ", ")
	for _, rule := range r.Spec.Rules {
		if m := headerMatches(rule); m != "" {
			words += ", the requests with " + m + " to " + backendNames(rule)
		}
		if m := mirrors(rule); m != "" {
			words += ", " + m
		}
	}
	if len(r.Spec.Hostnames) > 0 {
		hosts := make([]string, len(r.Spec.Hostnames))
		for i, h := range r.Spec.Hostnames {
			hosts[i] = string(h)
		}
		words += ", hosts " + strings.Join(hosts, ", ")
	}
	for _, p := range r.Status.Parents {
		if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted)); c != nil {
			words += fmt.Sprintf(", %s Accepted=%s", p.ParentRef.Name, c.Status)
		}
	}
	return words
}

func podState(p *corev1.Pod) string {
	words := string(p.Status.Phase)
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if ready {
		words += ", ready"
	} else {
		words += ", not ready"
	}
	var restarts int32
	for _, c := range p.Status.ContainerStatuses {
		restarts += c.RestartCount
	}
	words += fmt.Sprintf(", %d restarts", restarts)
	if reason, detail := pods.OneTrouble(pods.AsCached(p)); reason != "" {
		words += fmt.Sprintf(", %s: %s", reason, detail)
	}
	return words
}

func canaryState(c *webappv2.CanaryStatus, spec *webappv2.CanarySpec) string {
	words := c.Phase
	switch c.Phase {
	case "Canary":
		words += fmt.Sprintf(", revision %s at step %d of %d, weight %d%%, beside %s", c.CanaryRevision, c.Step+1, len(spec.EffectiveSteps()), c.Weight, c.StableRevision)
		if c.GateSince != nil {
			words += ", its gate waiting for a person since " + c.GateSince.UTC().Format(time.RFC3339)
		}
	case "Promoting":
		words += fmt.Sprintf(", the stable Deployment rolls to %s", c.CanaryRevision)
		if c.Reason == webappv2.ReasonRolledBackToPrevious {
			words += ", its pods kept warm serving all the traffic meanwhile (the spec was set back to it)"
		}
	case "RolledBack":
		words += fmt.Sprintf(", revision %s rolled back (%s: %s); %s serves", c.FailedRevision, c.Reason, c.Message, c.StableRevision)
	default:
		words += ", revision " + c.StableRevision + " serves"
		if c.PreviousRevision != "" && c.PreviousUntil != nil && spec.KeepPreviousWarm {
			words += fmt.Sprintf("; %s, the version before, is kept warm through the rollback window (until %s)", c.PreviousRevision, c.PreviousUntil.UTC().Format(time.RFC3339))
		}
	}
	for _, f := range c.Failures {
		words += fmt.Sprintf(", check %s failed %d times", f.Name, f.Count)
	}
	for _, e := range c.Checks {
		// The value against its max, or the operator's words for what the query gave instead.
		switch {
		case e.Error != "":
			words += fmt.Sprintf(", check %s: %s", e.Name, e.Error)
		case e.Passed:
			words += fmt.Sprintf(", check %s %s ≤ %s", e.Name, e.Value, e.Max)
		default:
			words += fmt.Sprintf(", check %s %s > %s", e.Name, e.Value, e.Max)
		}
	}
	return words
}

// headerMatches say the header matches of a rule, each once (a rule repeats them for every path prefix): "X-Canary:
// always or Cookie matching ...".
func headerMatches(rule gwv1.HTTPRouteRule) string {
	var ms []string
	for _, m := range rule.Matches {
		var hs []string
		for _, h := range m.Headers {
			sep := ": "
			if h.Type != nil && *h.Type == gwv1.HeaderMatchRegularExpression {
				sep = " matching "
			}
			hs = append(hs, string(h.Name)+sep+h.Value)
		}
		if w := strings.Join(hs, " and "); w != "" && !slices.Contains(ms, w) {
			ms = append(ms, w)
		}
	}
	return strings.Join(ms, " or ")
}

// mirrors say a rule's mirror filters: "mirror 30% to shop-canary".
func mirrors(rule gwv1.HTTPRouteRule) string {
	var ms []string
	for _, f := range rule.Filters {
		if m := f.RequestMirror; m != nil {
			pct := "100%"
			if m.Percent != nil {
				pct = fmt.Sprintf("%d%%", *m.Percent)
			}
			ms = append(ms, "mirror "+pct+" to "+string(m.BackendRef.Name))
		}
	}
	return strings.Join(ms, ", ")
}

// backendNames are a rule's backends' names.
func backendNames(rule gwv1.HTTPRouteRule) string {
	var ns []string
	for _, b := range rule.BackendRefs {
		ns = append(ns, string(b.Name))
	}
	return strings.Join(ns, ", ")
}
