// Package gen draws random WebApps that the API server accepts, for the generative tests (the promise test, the
// conversion tests, the action test): every spec field, in every form the CRD allows.
package gen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/conversion"
)

// Gen draws random WebApps that the API server accepts: every spec field, each in the forms the CRD allows
// (downward-API env with and without apiVersion, resource field refs with divisors, probes of every handler with
// and without their optional fields, int and percent strategies, quantities in every spelling, every Service
// type, both pod security levels and deletion policies). A few draws are accepted by the CRD but refused by the
// Deployment API (a pod label value with a space, say): those must show Ready=False with the server's message.
type Gen struct{ r *rand.Rand }

// New is a generator drawing from seed.
func New(seed uint64) *Gen { return &Gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g *Gen) chance(p float64) bool { return g.r.Float64() < p }
func (g *Gen) intn(n int) int        { return g.r.IntN(n) }
func (g *Gen) pick(s ...string) string {
	return s[g.intn(len(s))]
}

func (g *Gen) word() string {
	return g.pick("alpha", "beta", "gamma", "delta", "x", "web", "api", "v2", "a-b", "node.local")
}

// Image draws an image reference in one of its accepted forms.
func (g *Gen) Image() string {
	return g.pick("nginx:1.25", "registry.example.com:5000/team/app:v1.2.3", "ghcr.io/example/web",
		"app@sha256:"+strings.Repeat("ab", 32), "localhost/app:latest")
}

// WebApp draws a WebApp as a v1 client writes it.
func (g *Gen) WebApp(ns, name string) *webappv1.WebApp {
	app := &webappv1.WebApp{
		TypeMeta:   metav1.TypeMeta{APIVersion: webappv1.GroupVersion.String(), Kind: "WebApp"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
	}
	s := &app.Spec
	s.Image = g.Image()
	if g.chance(0.8) {
		s.Replicas = int32(1 + g.intn(10))
	}
	if g.chance(0.8) {
		s.Port = int32(1 + g.intn(65535))
	}
	if g.chance(0.5) {
		s.ProgressDeadlineSeconds = int32(1 + g.intn(86400))
	}
	s.DeletionPolicy = webappv1.DeletionPolicy(g.pick("", "Delete", "Orphan"))
	s.PodSecurity = webappv1.PodSecurity(g.pick("", "Restricted", "Baseline"))
	for range g.intn(3) {
		s.Command = append(s.Command, g.word())
	}
	for range g.intn(3) {
		s.Args = append(s.Args, "--"+g.word())
	}
	s.Env = g.env()
	s.EnvFrom = g.envFrom()
	s.Resources = g.resources()
	switch g.intn(3) {
	case 0:
		s.HealthCheckPath = "/" + g.pick("", "healthz", "ready/now", "a?b=c")
	case 1:
		s.ReadinessProbe = g.probe(false)
	}
	if g.chance(0.5) {
		s.LivenessProbe = g.probe(true)
	}
	for _, n := range g.subset("regcred", "other-registry", "mirror") {
		s.ImagePullSecrets = append(s.ImagePullSecrets, corev1.LocalObjectReference{Name: n})
	}
	s.ImagePullPolicy = corev1.PullPolicy(g.pick("", "Always", "IfNotPresent", "Never"))
	s.Service.Type = corev1.ServiceType(g.pick("", "ClusterIP", "NodePort", "LoadBalancer"))
	s.Service.Annotations = g.annotations()
	s.PodLabels = g.labels()
	s.PodAnnotations = g.annotations()
	if g.chance(0.5) {
		s.Strategy.MaxSurge = g.intOrPercent()
	}
	if g.chance(0.5) {
		s.Strategy.MaxUnavailable = g.intOrPercent()
	}
	if g.chance(0.5) {
		s.RevisionHistoryLimit = ptr.To(int32(g.intn(101)))
	}
	return app
}

// subset draws some of names, in order, without repeats.
func (g *Gen) subset(names ...string) []string {
	var out []string
	for _, n := range names {
		if g.chance(0.3) {
			out = append(out, n)
		}
	}
	return out
}

func (g *Gen) env() []corev1.EnvVar {
	var env []corev1.EnvVar
	for i := range g.intn(7) {
		e := corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", i)}
		switch g.intn(7) {
		case 0:
			e.Value = g.pick("", "plain", "with space", "a=b", "ünïcode")
		case 1:
			ref := &corev1.ObjectFieldSelector{FieldPath: g.pick("metadata.name", "metadata.namespace", "metadata.uid",
				"spec.nodeName", "spec.serviceAccountName", "status.podIP", "status.hostIP",
				"metadata.labels['app.kubernetes.io/name']", "metadata.annotations['example.com/note']")}
			if g.chance(0.5) {
				ref.APIVersion = "v1"
			}
			e.ValueFrom = &corev1.EnvVarSource{FieldRef: ref}
		case 2:
			ref := &corev1.ResourceFieldSelector{Resource: g.pick("limits.cpu", "requests.cpu")}
			if g.chance(0.5) {
				ref.Divisor = resource.MustParse(g.pick("1m", "1"))
			}
			if g.chance(0.5) {
				ref.Resource = g.pick("limits.memory", "requests.memory")
				ref.Divisor = resource.MustParse(g.pick("1", "1Ki", "1Mi", "1Gi"))
			}
			if g.chance(0.5) {
				ref.ContainerName = "app"
			}
			e.ValueFrom = &corev1.EnvVarSource{ResourceFieldRef: ref}
		case 3:
			ref := &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: g.pick("settings", "other")}, Key: g.pick("key", "a.b")}
			ref.Optional = g.optional()
			e.ValueFrom = &corev1.EnvVarSource{ConfigMapKeyRef: ref}
		case 4:
			ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: g.pick("token", "db")}, Key: g.pick("password", "user")}
			ref.Optional = g.optional()
			e.ValueFrom = &corev1.EnvVarSource{SecretKeyRef: ref}
		default:
			e.Value = fmt.Sprint(g.intn(1000))
		}
		env = append(env, e)
	}
	return env
}

func (g *Gen) optional() *bool {
	switch g.intn(3) {
	case 0:
		return ptr.To(true)
	case 1:
		return ptr.To(false)
	}
	return nil
}

func (g *Gen) envFrom() []corev1.EnvFromSource {
	var from []corev1.EnvFromSource
	for range g.intn(3) {
		s := corev1.EnvFromSource{}
		if g.chance(0.5) {
			s.Prefix = g.pick("APP_", "X")
		}
		if g.chance(0.5) {
			s.ConfigMapRef = &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Optional: g.optional()}
		} else {
			s.SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Optional: g.optional()}
		}
		from = append(from, s)
	}
	return from
}

// resources draws requests and limits in every spelling the CRD accepts, limits no lower than requests.
func (g *Gen) resources() corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{}
	cpu := [][2]string{{"1n", "1m"}, {"100m", "0.5"}, {"0.1", "1"}, {"250000u", "1500m"}, {"1.5m", "2"}, {"1", "1000m"}, {"2", "2"}}
	mem := [][2]string{{"64Mi", "128Mi"}, {"1e6", "1G"}, {"128M", "134217728"}, {"0.5Gi", "1Gi"}, {"1.5", "1Ki"}, {"100k", "1e6"}}
	for _, pair := range []struct {
		name    corev1.ResourceName
		choices [][2]string
	}{{corev1.ResourceCPU, cpu}, {corev1.ResourceMemory, mem}} {
		c := pair.choices[g.intn(len(pair.choices))]
		if g.chance(0.5) {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[pair.name] = resource.MustParse(c[0])
		}
		if g.chance(0.5) {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[pair.name] = resource.MustParse(c[1])
		}
	}
	return r
}

// probe draws a probe with exactly one handler; liveness probes keep successThreshold 1, as the API requires.
func (g *Gen) probe(liveness bool) *corev1.Probe {
	p := &corev1.Probe{}
	port := func() intstr.IntOrString {
		if g.chance(0.5) {
			return intstr.FromString("http")
		}
		return intstr.FromInt32(int32(1 + g.intn(65535)))
	}
	switch g.intn(4) {
	case 0:
		h := &corev1.HTTPGetAction{Port: port()}
		if g.chance(0.5) {
			h.Path = "/" + g.word()
		}
		if g.chance(0.3) {
			h.Scheme = corev1.URIScheme(g.pick("HTTP", "HTTPS"))
		}
		if g.chance(0.2) {
			h.Host = "localhost"
		}
		if g.chance(0.3) {
			h.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-Probe", Value: g.word()}}
		}
		p.HTTPGet = h
	case 1:
		p.TCPSocket = &corev1.TCPSocketAction{Port: port()}
	case 2:
		p.Exec = &corev1.ExecAction{Command: []string{"cat", "/tmp/" + g.word()}}
	default:
		p.GRPC = &corev1.GRPCAction{Port: int32(1 + g.intn(65535))}
		if g.chance(0.5) {
			p.GRPC.Service = ptr.To(g.pick("", "health"))
		}
	}
	for _, f := range []*int32{&p.InitialDelaySeconds, &p.TimeoutSeconds, &p.PeriodSeconds, &p.FailureThreshold} {
		if g.chance(0.4) {
			*f = int32(1 + g.intn(30))
		}
	}
	if g.chance(0.3) {
		p.SuccessThreshold = 1
		if !liveness {
			p.SuccessThreshold = int32(1 + g.intn(5))
		}
	}
	if liveness && g.chance(0.2) {
		p.TerminationGracePeriodSeconds = ptr.To(int64(1 + g.intn(60)))
	}
	return p
}

func (g *Gen) intOrPercent() *intstr.IntOrString {
	if g.chance(0.5) {
		return ptr.To(intstr.FromInt32(int32(g.intn(4))))
	}
	return ptr.To(intstr.FromString(fmt.Sprintf("%d%%", g.intn(101))))
}

// labels draws pod labels; one draw in twenty has a value the Deployment API refuses (the CRD cannot tell).
func (g *Gen) labels() map[string]string {
	l := map[string]string{}
	// Near the operator's own keys, not among them (app.kubernetes.io/name, instance, managed-by and anything under
	// webapp.example.com/ are refused).
	for _, k := range g.subset("team", "example.com/tier", "version", "app.kubernetes.io/version", "webapp.example.com.au/tier") {
		l[k] = g.pick("", "a", "v1.2", "blue-green")
	}
	if g.chance(0.05) {
		l["refused"] = "has space"
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

func (g *Gen) annotations() map[string]string {
	a := map[string]string{}
	// Near the operator's own keys, not among them (anything under webapp.example.com/ is refused on the pods).
	for _, k := range g.subset("example.com/note", "prometheus.io/scrape", "team", "webapp.example.com.au/note") {
		a[k] = g.pick("", "true", "free text, with: punctuation", "{\"json\": 1}")
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// Manifest is app as YAML a user can apply as it is (no namespace, no server fields).
func Manifest(app *webappv1.WebApp) string {
	// Printed as v2, the storage version: exact for a case drawn as v2 too (its v1 form keeps the rest in the
	// conversion data in its status, which conversion.ToHub reads).
	hub := &webappv2.WebApp{}
	if err := conversion.ToHub(app, hub); err != nil {
		return fmt.Sprintf("(cannot convert: %v)", err)
	}
	clean := &webappv2.WebApp{TypeMeta: metav1.TypeMeta{APIVersion: webappv2.GroupVersion.String(), Kind: "WebApp"},
		ObjectMeta: metav1.ObjectMeta{Name: app.Name}, Spec: hub.Spec}
	data, err := yaml.Marshal(clean)
	if err != nil {
		return fmt.Sprintf("(cannot print: %v)", err)
	}
	return strings.ReplaceAll(string(data), "  creationTimestamp: null\n", "")
}

// WebAppV2 draws a WebApp as v2 draws it: a v1 draw converted, then what only v2 can say (an unset replica count,
// more ports, a primary port not named http). It returns the v2 object to create and its v1 form (the form the
// checks read, with the conversion data in its status).
func (g *Gen) WebAppV2(ns, name string) (*webappv2.WebApp, *webappv1.WebApp) {
	hub := &webappv2.WebApp{}
	if err := conversion.ToHub(g.WebApp(ns, name), hub); err != nil {
		panic(err)
	}
	hub.TypeMeta = metav1.TypeMeta{APIVersion: webappv2.GroupVersion.String(), Kind: "WebApp"}
	if g.chance(0.3) {
		hub.Spec.Replicas = nil
	}
	if g.chance(0.6) {
		if len(hub.Spec.Ports) == 0 {
			hub.Spec.Ports = []webappv2.Port{{Name: "http", Port: 80}}
		}
		if g.chance(0.5) {
			hub.Spec.Ports[0].Name = g.pick("web", "main", "h2c", "p-1")
		}
		used := map[int32]bool{hub.Spec.Ports[0].Port: true}
		for i, n := range g.subset("metrics", "grpc", "admin", "debug-port") {
			p := int32(1 + g.intn(65535))
			if used[p] {
				p = int32(60000 + i)
			}
			if used[p] {
				continue
			}
			used[p] = true
			hub.Spec.Ports = append(hub.Spec.Ports, webappv2.Port{Name: n, Port: p})
		}
	}
	if g.chance(0.3) {
		hub.Spec.Autoscaling = g.Autoscaling()
	}
	if g.chance(0.4) {
		hub.Spec.Expose = g.Expose()
	}
	if g.chance(0.3) {
		hub.Spec.Rollout.Canary = g.Canary()
		c := hub.Spec.Rollout.Canary
		routed := hub.Spec.Expose != nil && hub.Spec.Expose.Gateway != nil
		switch {
		case g.chance(0.3):
			// A blue/green instead of steps: switched by the route behind a Gateway, by the Service without one; a
			// preview host behind either a Gateway or an Ingress.
			g.BlueGreen(c, hub.Spec.Expose != nil)
		case routed:
			// Behind a Gateway: steps that route by request.
			g.RouteByRequest(c)
		}
		if (routed || c.BlueGreen != nil) && c.RollbackWindowSeconds > 0 && g.chance(0.5) {
			// The version before kept warm through the rollback window (with the window only; steps only behind a
			// route).
			c.KeepPreviousWarm = true
		}
	}
	if g.chance(0.6) {
		g.Pod(&hub.Spec)
	}
	return hub, Spoke(hub)
}

// Canary draws a canary strategy: one to three steps, with or without checks, every field in every accepted form.
func (g *Gen) Canary() *webappv2.CanarySpec {
	c := &webappv2.CanarySpec{}
	for range 1 + g.intn(3) {
		step := webappv2.CanaryStep{Weight: g.between(1, 99), PauseSeconds: int32(g.pick2(0, 1, 30, 3600, 86400))}
		if g.chance(0.3) {
			// A gate: for ever, or with a timeout that rolls back or goes on (onTimeout only with the timeout).
			step.Gate = &webappv2.CanaryGate{}
			if g.chance(0.5) {
				step.Gate.TimeoutSeconds = int32(g.pick2(1, 60, 3600, 604800))
				step.Gate.OnTimeout = webappv2.GateTimeout(g.pick("", "RollBack", "Promote"))
			}
		}
		c.Steps = append(c.Steps, step)
	}
	for _, name := range g.subset("errors", "latency-p99", "5xx") {
		check := webappv2.CanaryCheck{
			Name:            name,
			Max:             g.pick("0", "0.01", "5", "-1.5", "100", "0.000001"),
			FailuresAllowed: int32(g.intn(4)),
			OnNoData:        webappv2.CheckNoData(g.pick("", "Fail", "Pass", "Wait")),
		}
		// Its source: a Prometheus query or a webhook (exactly one).
		if g.chance(0.5) {
			check.Prometheus = &webappv2.PrometheusQuery{
				Address: g.pick("http://prometheus.monitoring:9090", "https://prom.example.com/prometheus", "http://10.0.0.9:9090"),
				Query:   g.pick("vector(0)", `sum(rate(http_requests_total{code=~"5.."}[1m])) / sum(rate(http_requests_total[1m]))`, "scalar(up)"),
			}
		} else {
			check.Webhook = &webappv2.WebhookCheck{URL: g.pick("http://checks.monitoring:8080/errors", "https://kayenta.example.com/canary/judge?app=web")}
			if g.chance(0.5) {
				check.Webhook.TimeoutSeconds = int32(g.pick2(1, 3, 5))
			}
			// Headers: a value in the spec, or a Secret's key (which need not exist: the check then fails).
			for _, name := range g.subset("Authorization", "X-Tenant", "x-api-key") {
				h := webappv2.WebhookHeader{Name: name, Value: g.pick("Bearer abc", "shop", "k-1 2 3")}
				if g.chance(0.5) {
					h.Value, h.SecretKeyRef = "", &webappv2.SecretKeyRef{Name: g.pick("judge-token", "api.keys"), Key: g.pick("token", "key.txt", "A_B-c")}
				}
				check.Webhook.Headers = append(check.Webhook.Headers, h)
			}
		}
		if check.OnNoData == webappv2.NoDataWait && g.chance(0.5) {
			// The bound only with the wait it bounds (the CRD refuses it otherwise).
			check.NoDataWaitSeconds = int32(g.pick2(1, 60, 300, 3600))
		}
		c.Checks = append(c.Checks, check)
	}
	if g.chance(0.5) {
		c.CheckIntervalSeconds = g.between(1, 3600)
	}
	if g.chance(0.3) {
		c.RollbackWindowSeconds = int32(g.pick2(1, 60, 3600, 2592000))
	}
	if g.chance(0.3) {
		// How long a canary's pods stay after the traffic left them: a few seconds (a test waits for the rest that
		// follows; the bounds are TestBlueGreenRefusals').
		c.RetireSeconds = g.between(2, 5)
	}
	return c
}

// BlueGreen turns c into a blue/green (no steps): its preview's pause and size, its gate (for ever, or with a
// timeout either way), its keep, when exposed (through a Gateway or an Ingress) its preview host, and the part of it
// each check gates, each set or not.
func (g *Gen) BlueGreen(c *webappv2.CanarySpec, exposed bool) {
	bg := &webappv2.BlueGreenSpec{PreviewSeconds: int32(g.pick2(0, 1, 30, 86400)), KeepSeconds: int32(g.pick2(0, 1, 600, 86400))}
	if g.chance(0.4) {
		bg.Gate = &webappv2.CanaryGate{}
		if g.chance(0.5) {
			bg.Gate.TimeoutSeconds = int32(g.pick2(1, 60, 604800))
			bg.Gate.OnTimeout = webappv2.GateTimeout(g.pick("", "RollBack", "Promote"))
		}
	}
	if exposed && g.chance(0.5) {
		bg.PreviewHost = webappv2.Hostname(g.pick("preview.shop.example.com", "*.preview.example.com", "next"))
	}
	if g.chance(0.4) {
		bg.PreviewPercent = g.between(1, 100)
	}
	for i := range c.Checks {
		// A check of the preview alone (a smoke test), of the keep alone, or of both.
		c.Checks[i].During = webappv2.CheckDuring(g.pick("", "", "Preview", "Keep"))
	}
	c.Steps, c.BlueGreen = nil, bg
}

// RouteByRequest draws, for a canary behind a Gateway, steps that route by request: header matches (exact or by a
// regular expression, up to eight in a match), cookies, up to four matches in a step, a mirror of 1 to 100
// percent, and a weight of 0 beside either.
func (g *Gen) RouteByRequest(c *webappv2.CanarySpec) {
	for i := range c.Steps {
		step := &c.Steps[i]
		if g.chance(0.4) {
			for range 1 + g.intn(4) {
				step.Matches = append(step.Matches, g.match())
			}
		}
		if g.chance(0.3) {
			step.MirrorPercent = int32(g.pick2(1, 25, 50, 100))
		}
		if (step.Matches != nil || step.MirrorPercent > 0) && g.chance(0.4) {
			step.Weight = 0
		}
	}
}

// match draws a request match: headers, a cookie, or both (never a Cookie header beside a cookie).
func (g *Gen) match() webappv2.CanaryMatch {
	var m webappv2.CanaryMatch
	cookie := g.chance(0.4)
	if cookie {
		m.Cookie = &webappv2.CanaryCookieMatch{Name: g.pick("canary", "ab_group", "__Host-v"), Value: g.pick("always", "b", "1.2+x", "a|b(c)")}
	}
	if !cookie || g.chance(0.3) {
		names := g.subset("X-Canary", "user-agent", "X-Region", "Accept-Language", "x-b", "X-Tenant-Id", "X-C", "X-Debug")
		if len(names) == 0 {
			names = []string{"X-Canary"}
		}
		for _, n := range names {
			h := webappv2.CanaryHeaderMatch{Name: n, Value: g.pick("always", "1", "eu-west", "fr;q=0.9, en")}
			if g.chance(0.3) {
				h.Type, h.Value = webappv2.HeaderRegularExpression, g.pick(".*Firefox.*", "^(eu|us)-[a-z]+$", `\d+`, "a|b")
			} else if g.chance(0.3) {
				h.Type = webappv2.HeaderExact
			}
			m.Headers = append(m.Headers, h)
		}
	}
	return m
}

// Spoke is hub's v1 form, with what v1 cannot say in the conversion data of its status (Manifest prints it whole).
func Spoke(hub *webappv2.WebApp) *webappv1.WebApp {
	spoke := &webappv1.WebApp{}
	if err := conversion.FromHub(hub, spoke); err != nil {
		panic(err)
	}
	spoke.TypeMeta = metav1.TypeMeta{APIVersion: webappv1.GroupVersion.String(), Kind: "WebApp"}
	return spoke
}

// Expose draws spec.expose in every accepted form: one to three hosts, or 16 (wildcards among them), up to three
// paths (escapes and every allowed character among them),
// through a Gateway (in the namespace or another, with a listener or none) or an Ingress (with TLS or none).
func (g *Gen) Expose() *webappv2.Expose {
	e := &webappv2.Expose{}
	n := 1 + g.intn(3)
	if g.chance(0.1) {
		n = 16 // the most
	}
	for i := range n {
		h := webappv2.Hostname(fmt.Sprintf("%s%d.example.com", g.word(), i))
		if g.chance(0.2) {
			h = "*." + h
		}
		e.Hosts = append(e.Hosts, h)
	}
	for i := range g.intn(4) {
		e.Paths = append(e.Paths, webappv2.PathPrefix(g.pick("/", "/api", "/v1/", "/static/assets", "/a-b_c.d~e", "/%41%7e", "/$x;y=1,z@:+!*'()&")+fmt.Sprint(i)))
	}
	if g.chance(0.5) {
		e.Ingress = &webappv2.IngressRef{ClassName: g.pick("traefik", "nginx", "internal.example.com")}
		if g.chance(0.5) {
			e.TLS = &webappv2.ExposeTLS{SecretName: g.word() + "-tls"}
		}
		return e
	}
	e.Gateway = &webappv2.GatewayRef{Name: g.pick("public", "internal")}
	if g.chance(0.5) {
		e.Gateway.Namespace = g.pick("infra", "gateways")
	}
	if g.chance(0.5) {
		e.Gateway.SectionName = g.pick("http", "https", "web.example")
	}
	return e
}

// Autoscaling draws spec.autoscaling in every accepted form: with and without minReplicas and each target, and a
// behavior with each direction unset, empty or set (see scalingRules).
func (g *Gen) Autoscaling() *webappv2.Autoscaling {
	a := &webappv2.Autoscaling{MaxReplicas: int32(1 + g.intn(100))}
	if g.chance(0.6) {
		a.MinReplicas = ptr.To(int32(1 + g.intn(int(a.MaxReplicas))))
	}
	if g.chance(0.5) {
		a.TargetCPUUtilizationPercentage = ptr.To(int32(1 + g.intn(1000)))
	}
	if g.chance(0.4) {
		a.TargetMemoryUtilizationPercentage = ptr.To(int32(1 + g.intn(1000)))
	}
	if g.chance(0.4) {
		a.Behavior = &webappv2.AutoscalingBehavior{ScaleUp: g.scalingRules(), ScaleDown: g.scalingRules()}
	}
	return a
}

// scalingRules draws one direction's rules as the CRD accepts them (the HPA API's bounds): unset, empty, or with a
// stabilization window of 0 to 3600 (both bounds among them), each select policy, one to three policies of either
// type (value from 1 to the most an int32 holds, period from 1 to 1800) and a tolerance of zero or more in each
// spelling of a quantity.
func (g *Gen) scalingRules() *webappv2.ScalingRules {
	if g.chance(0.3) {
		return nil
	}
	r := &webappv2.ScalingRules{}
	if g.chance(0.6) {
		r.StabilizationWindowSeconds = ptr.To(g.between(0, 3600))
	}
	if g.chance(0.5) {
		r.SelectPolicy = ptr.To(autoscalingv2.ScalingPolicySelect(g.pick("Max", "Min", "Disabled")))
	}
	if g.chance(0.6) {
		for range 1 + g.intn(3) {
			p := webappv2.ScalingPolicy{Type: autoscalingv2.HPAScalingPolicyType(g.pick("Pods", "Percent")),
				Value: g.between(1, 100), PeriodSeconds: g.between(1, 1800)}
			if g.chance(0.1) {
				p.Value = math.MaxInt32
			}
			r.Policies = append(r.Policies, p)
		}
	}
	if g.chance(0.4) {
		r.Tolerance = ptr.To(resource.MustParse(g.pick("0", "0.05", "50m", "1m", "1", "1.5", "1e-2", "2e0", "1Ki")))
	}
	return r
}

// between draws an int32 from lo to hi, either bound one time in ten.
func (g *Gen) between(lo, hi int32) int32 {
	switch g.intn(10) {
	case 0:
		return lo
	case 1:
		return hi
	}
	return lo + int32(g.intn(int(hi-lo+1)))
}

// Pod draws the rest of a real app's pod into s, in every form the CRD accepts: volumes of each source (ConfigMap
// and Secret files whole or by key, with modes and optional; emptyDirs on disk or in memory with and without a size
// limit; an existing claim; an owned claim of each access mode and deletion policy, one that only one pod can
// mount only where the WebApp runs one replica without autoscaling or a surge), mounts (a volume mounted twice, by
// subPath, read-only), a read-only root with writable paths, a startup probe, a drain within the grace period, a
// service account, node selector, tolerations, affinity, a spread in either form, a priority class, init containers
// and sidecars. It reads what s already says (replicas, autoscaling, rollout) to stay within the CRD's rules.
func (g *Gen) Pod(s *webappv2.WebAppSpec) {
	var vols []string
	for _, name := range g.subset("config", "creds", "scratch", "cache", "shared", "data") {
		v := webappv2.Volume{Name: name}
		switch name {
		case "config":
			v.ConfigMap = &webappv2.ConfigMapVolume{Name: g.pick("settings", "other"), Items: g.items(), DefaultMode: g.mode(), Optional: g.optional()}
		case "creds":
			v.Secret = &webappv2.SecretVolume{Name: g.pick("token", "db"), Items: g.items(), DefaultMode: g.mode(), Optional: g.optional()}
		case "scratch", "cache":
			v.EmptyDir = &webappv2.EmptyDirVolume{}
			if g.chance(0.4) {
				v.EmptyDir.Medium = corev1.StorageMediumMemory
			}
			if g.chance(0.5) {
				v.EmptyDir.SizeLimit = ptr.To(webappv2.StorageSize(g.pick("64Mi", "1Gi", "1.5Gi", "100M", "1e6", "500k", "0.5")))
			}
		case "shared":
			v.PersistentVolumeClaim = &webappv2.ClaimReference{ClaimName: g.pick("shared-data", "team.files"), ReadOnly: g.chance(0.5)}
		case "data":
			c := &webappv2.OwnedClaim{Size: webappv2.StorageSize(g.pick("1Gi", "512Mi", "10G", "1.5Gi", "100M", "2e9", ".5Gi"))}
			if g.chance(0.5) {
				c.StorageClassName = ptr.To(g.pick("", "standard", "local-storage"))
			}
			c.AccessMode = corev1.PersistentVolumeAccessMode(g.pick("", "ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany"))
			onePod := (s.Replicas == nil || *s.Replicas == 1) && s.Autoscaling == nil && s.Rollout.MaxSurge == nil && s.Rollout.MaxUnavailable == nil && s.Rollout.Canary == nil
			if !onePod && (c.AccessMode == "" || c.AccessMode == corev1.ReadWriteOnce || c.AccessMode == corev1.ReadWriteOncePod) {
				c.AccessMode = corev1.ReadWriteMany
			}
			if c.AccessMode == "" {
				c.AccessMode = corev1.ReadWriteOnce // the CRD's default, as the server stores it
			}
			c.DeletionPolicy = webappv2.ClaimDeletionPolicy(g.pick("Retain", "Delete"))
			v.Claim = c
			// The claim is the WebApp's PersistentVolumeClaim of its name whatever the volume is called: a change
			// from one draw to the next may rename it (the claim's rules hold over the rename).
			v.Name = g.pick("data", "state")
		}
		s.Volumes = append(s.Volumes, v)
		vols = append(vols, v.Name)
	}
	s.Container.VolumeMounts = g.mounts(vols, "/var/lib/", 3)
	if g.chance(0.3) {
		s.Container.ReadOnlyRootFilesystem = true
	}
	for _, p := range g.subset("/tmp", "/var/cache/nginx", "/run") {
		s.Container.WritablePaths = append(s.Container.WritablePaths, webappv2.AbsolutePath(p))
	}
	if g.chance(0.3) {
		s.Container.StartupProbe = g.probe(true)
	}
	if g.chance(0.3) {
		s.Pod.TerminationGracePeriodSeconds = ptr.To(int64(g.between(0, 120)))
	}
	if grace := ptr.Deref(s.Pod.TerminationGracePeriodSeconds, webappv2.DefaultTerminationGracePeriodSeconds); grace > 1 && g.chance(0.4) {
		s.Container.DrainSeconds = 1 + int32(g.intn(int(min(grace-1, 3600))))
	}
	if g.chance(0.3) {
		s.Pod.ServiceAccountName = g.pick("app-sa", "default", "web.runner")
	}
	s.Pod.AutomountServiceAccountToken = g.optional()
	for _, k := range g.subset("kubernetes.io/os", "example.com/pool") {
		if s.Pod.NodeSelector == nil {
			s.Pod.NodeSelector = map[string]string{}
		}
		s.Pod.NodeSelector[k] = g.pick("linux", "web", "")
	}
	for _, t := range g.subset("dedicated", "any", "unreachable") {
		switch t {
		case "dedicated":
			s.Pod.Tolerations = append(s.Pod.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule})
		case "any":
			s.Pod.Tolerations = append(s.Pod.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		default:
			s.Pod.Tolerations = append(s.Pod.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(g.intn(600)))})
		}
	}
	if g.chance(0.3) {
		s.Pod.Affinity = g.affinity()
	}
	switch g.intn(4) {
	case 0:
		s.Pod.Spread = &webappv2.Spread{Across: webappv2.SpreadAcross(g.pick("Nodes", "Zones")), Required: g.chance(0.5)}
		if g.chance(0.5) {
			s.Pod.Spread.MaxSkew = g.between(1, 100)
		}
	case 1:
		c := corev1.TopologySpreadConstraint{MaxSkew: g.between(1, 5), TopologyKey: g.pick("kubernetes.io/hostname", "topology.kubernetes.io/zone"),
			WhenUnsatisfiable: corev1.UnsatisfiableConstraintAction(g.pick("DoNotSchedule", "ScheduleAnyway")),
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "web"}}}
		if c.WhenUnsatisfiable == corev1.DoNotSchedule && g.chance(0.5) {
			c.MinDomains = ptr.To(g.between(1, 3))
		}
		if g.chance(0.5) {
			c.MatchLabelKeys = []string{"pod-template-hash"}
		}
		s.Pod.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
	}
	if g.chance(0.2) {
		s.Pod.PriorityClassName = g.pick("high-priority", "batch.low")
	}
	for _, name := range g.subset("migrate", "proxy", "wait-for-db") {
		c := webappv2.ExtraContainer{Name: name, Image: g.Image()}
		for range g.intn(3) {
			c.Command = append(c.Command, g.word())
		}
		if g.chance(0.3) {
			c.Args = []string{"--" + g.word()}
		}
		if g.chance(0.4) {
			c.Env = g.env()
		}
		if g.chance(0.3) {
			c.Resources = g.resources()
		}
		c.ImagePullPolicy = corev1.PullPolicy(g.pick("", "Always", "IfNotPresent", "Never"))
		c.VolumeMounts = g.mounts(vols, "/mnt/", 2)
		if name == "proxy" || g.chance(0.2) {
			c.RestartPolicy = corev1.ContainerRestartPolicyAlways
			if g.chance(0.5) {
				c.ReadinessProbe = g.probe(false)
			}
		}
		s.Pod.InitContainers = append(s.Pod.InitContainers, c)
	}
}

// items draws the chosen keys of a ConfigMap or Secret volume (none: every key).
func (g *Gen) items() []webappv2.KeyToPath {
	var out []webappv2.KeyToPath
	for i, k := range g.subset("app.conf", "key", "a.b") {
		out = append(out, webappv2.KeyToPath{Key: k, Path: g.pick("conf/", "", "a/b/") + fmt.Sprint(i) + k, Mode: g.mode()})
	}
	return out
}

// mode draws file mode bits, or none.
func (g *Gen) mode() *int32 {
	if g.chance(0.6) {
		return nil
	}
	return ptr.To(int32(g.pick2(0o400, 0o644, 0o755, 0o777, 0)))
}

func (g *Gen) pick2(v ...int) int { return v[g.intn(len(v))] }

// mounts draws mounts of some of vols under dir (at most most, a volume twice among them), by subPath and
// read-only or not.
func (g *Gen) mounts(vols []string, dir string, most int) []webappv2.VolumeMount {
	var out []webappv2.VolumeMount
	for i := range g.intn(most + 1) {
		if len(vols) == 0 {
			break
		}
		// Clean paths only (the CRD refuses /x/, //x and /x/.), dot-files and names that start with '..' among them.
		m := webappv2.VolumeMount{Name: vols[g.intn(len(vols))], MountPath: fmt.Sprintf("%s%s%s-%d", dir, g.pick("", "", ".", ".."), g.word(), i)}
		if g.chance(0.3) {
			m.SubPath = g.pick("sub", "a/b", "app.conf", "..data-not-a-segment")
		}
		m.ReadOnly = g.chance(0.4)
		out = append(out, m)
	}
	return out
}

// affinity draws node affinity, pod affinity and pod anti-affinity, each required or preferred.
func (g *Gen) affinity() *corev1.Affinity {
	a := &corev1.Affinity{}
	if g.chance(0.6) {
		term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}}}}
		a.NodeAffinity = &corev1.NodeAffinity{}
		if g.chance(0.5) {
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}
		} else {
			a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: g.between(1, 100), Preference: term}}
		}
	}
	term := corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "web"}}}
	if g.chance(0.5) {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: g.between(1, 100), PodAffinityTerm: term}}}
	}
	if g.chance(0.3) || (a.NodeAffinity == nil && a.PodAntiAffinity == nil) {
		a.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
	}
	return a
}
