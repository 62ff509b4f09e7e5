package desired

import (
	"regexp"

	networkingv1 "k8s.io/api/networking/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
)

// exposePaths are spec.expose's path prefixes, or "/" when it names none.
func exposePaths(e *webappv2.Expose) []string {
	if len(e.Paths) == 0 {
		return []string{"/"}
	}
	paths := make([]string, len(e.Paths))
	for i, p := range e.Paths {
		paths[i] = string(p)
	}
	return paths
}

// Ingress is the complete Ingress we mean to own for app, or nil when app is not exposed through an
// Ingress: a rule per host, a Prefix path per path prefix, all to the Service's primary port by name, and the TLS
// Secret for every host. Every field the API server would default is set, so what we own compares equal.
func Ingress(app *webappv2.WebApp) *networkingv1ac.IngressApplyConfiguration {
	e := app.Spec.Expose
	if e == nil || e.Ingress == nil {
		return nil
	}
	hosts := make([]string, len(e.Hosts))
	for i, h := range e.Hosts {
		hosts[i] = string(h)
	}
	return ingress(app, app.Name, hosts)
}

// ingress is an Ingress of expose's class for hosts: a rule per host, a Prefix path per path prefix, all to Service
// service's primary port by name, and expose's TLS Secret for every host.
func ingress(app *webappv2.WebApp, service string, hosts []string) *networkingv1ac.IngressApplyConfiguration {
	e := app.Spec.Expose
	backend := networkingv1ac.IngressBackend().WithService(networkingv1ac.IngressServiceBackend().
		WithName(service).WithPort(networkingv1ac.ServiceBackendPort().WithName(ports(app)[0].Name)))
	spec := networkingv1ac.IngressSpec().WithIngressClassName(e.Ingress.ClassName)
	for _, h := range hosts {
		http := networkingv1ac.HTTPIngressRuleValue()
		for _, p := range exposePaths(e) {
			http.WithPaths(networkingv1ac.HTTPIngressPath().WithPath(p).WithPathType(networkingv1.PathTypePrefix).WithBackend(backend))
		}
		spec.WithRules(networkingv1ac.IngressRule().WithHost(h).WithHTTP(http))
	}
	if e.TLS != nil {
		spec.WithTLS(networkingv1ac.IngressTLS().WithSecretName(e.TLS.SecretName).WithHosts(hosts...))
	}
	return networkingv1ac.Ingress(service, app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec)
}

// HTTPRoute is the complete HTTPRoute we mean to own for app, or nil when app is not exposed through a
// Gateway: attached to the Gateway (and listener) it names, for its hosts, one rule matching its path prefixes
// to the Service's primary port, and while a canary runs, the canary's traffic t (CanaryRule, a mirror on expose's
// rule). The fields the Gateway API's CRD defaults are set to those defaults, so what we own compares equal.
func HTTPRoute(app *webappv2.WebApp, t canary.Traffic) *gwv1ac.HTTPRouteApplyConfiguration {
	e := app.Spec.Expose
	if e == nil || e.Gateway == nil {
		return nil
	}
	// The stable Service, and while a canary runs, the canary's by its weight.
	rule := gwv1ac.HTTPRouteRule().WithBackendRefs(RouteBackends(app, t.Weight)...)
	for _, p := range exposePaths(e) {
		rule.WithMatches(prefixMatch(p))
	}
	if t.Mirror > 0 {
		// A copy of that share of the requests to the canary, whose answers the gateway drops (every request
		// without a percent, so a gateway that mirrors but not by a share can do it).
		mirror := gwv1ac.HTTPRequestMirrorFilter().WithBackendRef(gwv1ac.BackendObjectReference().
			WithGroup("").WithKind("Service").WithName(gwv1.ObjectName(CanaryName(app))).WithPort(ports(app)[0].Port))
		if t.Mirror < 100 {
			mirror.WithPercent(t.Mirror)
		}
		rule.WithFilters(gwv1ac.HTTPRouteFilter().WithType(gwv1.HTTPRouteFilterRequestMirror).WithRequestMirror(mirror))
	}
	spec := gwv1ac.HTTPRouteSpec().WithParentRefs(gatewayParent(e.Gateway)).WithRules(rule)
	if r := CanaryRule(app, t.Matches); r != nil {
		spec.WithRules(r)
	}
	for _, h := range e.Hosts {
		spec.WithHostnames(gwv1.Hostname(h))
	}
	return gwv1ac.HTTPRoute(app.Name, app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec)
}

// gatewayParent is a route's reference to the Gateway (and listener) g names.
func gatewayParent(g *webappv2.GatewayRef) *gwv1ac.ParentReferenceApplyConfiguration {
	parent := gwv1ac.ParentReference().WithGroup(gwv1.GroupName).WithKind("Gateway").WithName(gwv1.ObjectName(g.Name))
	if g.Namespace != "" {
		parent.WithNamespace(gwv1.Namespace(g.Namespace))
	}
	if g.SectionName != "" {
		parent.WithSectionName(gwv1.SectionName(g.SectionName))
	}
	return parent
}

// previewHost is a blue/green's preview host while its new version runs (d: a canary under way, from its preview
// until its promotion is complete; "": none must be served).
func previewHost(app *webappv2.WebApp, d canary.Decision) string {
	c := app.Spec.Rollout.Canary
	if app.Spec.Expose == nil || c == nil || c.BlueGreen == nil || c.BlueGreen.PreviewHost == "" ||
		d.State.Canary == "" || d.ReplicaWeight <= 0 || d.State.Retiring != "" || d.State.WayBack() {
		// (While a version the spec left retires, the canary's Service selects its pods, not the new version's; on
		// the way back to the version kept warm, there is nothing new to preview.)
		return ""
	}
	return string(c.BlueGreen.PreviewHost)
}

// PreviewRoute is a blue/green's preview HTTPRoute while its new version runs (previewHost): the requests for
// previewHost on expose's Gateway and paths go to the canary's Service alone. It is named as the canary's Deployment
// and Service, so it adds no name for another WebApp's objects to collide with. nil without a preview host, a
// Gateway or a canary under way: it must not exist.
func PreviewRoute(app *webappv2.WebApp, d canary.Decision) *gwv1ac.HTTPRouteApplyConfiguration {
	e := app.Spec.Expose
	host := previewHost(app, d)
	if host == "" || e.Gateway == nil {
		return nil
	}
	rule := gwv1ac.HTTPRouteRule().WithBackendRefs(serviceBackend(app, CanaryName(app), 1))
	for _, p := range exposePaths(e) {
		rule.WithMatches(prefixMatch(p))
	}
	return gwv1ac.HTTPRoute(CanaryName(app), app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(gwv1ac.HTTPRouteSpec().WithParentRefs(gatewayParent(e.Gateway)).WithRules(rule).
			WithHostnames(gwv1.Hostname(host)))
}

// PreviewIngress is a blue/green's preview Ingress while its new version runs behind an Ingress (previewHost): the
// requests for previewHost on expose's paths go to the canary's Service alone, through expose's Ingress class, with
// expose's TLS Secret for the host (a wildcard certificate, say). Named as the canary's Deployment and Service. nil
// without a preview host, an Ingress or a canary under way: it must not exist.
func PreviewIngress(app *webappv2.WebApp, d canary.Decision) *networkingv1ac.IngressApplyConfiguration {
	e := app.Spec.Expose
	host := previewHost(app, d)
	if host == "" || e.Ingress == nil {
		return nil
	}
	return ingress(app, CanaryName(app), []string{host})
}

// CanaryRule is the route's rule that sends the requests meeting one of matches to the canary alone, on expose's
// path prefixes (nil: no matches). A gateway prefers it to expose's rule for those requests: of the rules that
// match a request, the Gateway API picks the one with the most header matches first when their paths are the same.
func CanaryRule(app *webappv2.WebApp, matches []webappv2.CanaryMatch) *gwv1ac.HTTPRouteRuleApplyConfiguration {
	if len(matches) == 0 {
		return nil
	}
	rule := gwv1ac.HTTPRouteRule().WithBackendRefs(serviceBackend(app, CanaryName(app), 1))
	for _, m := range matches {
		for _, p := range exposePaths(app.Spec.Expose) {
			match := prefixMatch(p)
			for _, h := range m.Headers {
				typ := gwv1.HeaderMatchExact
				if h.Type == webappv2.HeaderRegularExpression {
					typ = gwv1.HeaderMatchRegularExpression
				}
				match.WithHeaders(gwv1ac.HTTPHeaderMatch().WithType(typ).WithName(gwv1.HTTPHeaderName(h.Name)).WithValue(h.Value))
			}
			if c := m.Cookie; c != nil {
				match.WithHeaders(gwv1ac.HTTPHeaderMatch().WithType(gwv1.HeaderMatchRegularExpression).WithName("Cookie").WithValue(CookieRegexp(c)))
			}
			rule.WithMatches(match)
		}
	}
	return rule
}

// prefixMatch matches the requests whose path starts with prefix p.
func prefixMatch(p string) *gwv1ac.HTTPRouteMatchApplyConfiguration {
	return gwv1ac.HTTPRouteMatch().WithPath(gwv1ac.HTTPPathMatch().WithType(gwv1.PathMatchPathPrefix).WithValue(p))
}

// CookieRegexp is a regular expression that a Cookie header's whole value matches when it carries cookie c with
// its value, among others or alone (anchored, so a gateway that finds it anywhere in the value, as Traefik does,
// and one that matches the whole value, as Envoy does, agree).
func CookieRegexp(c *webappv2.CanaryCookieMatch) string {
	return `^(.*;\s*)?` + regexp.QuoteMeta(c.Name) + "=" + regexp.QuoteMeta(c.Value) + `(\s*;.*)?$`
}

// ExposedURLs are the URLs spec.expose routes, host by host and path by path (https with a TLS Secret); a
// wildcard host is shown as it is.
func ExposedURLs(app *webappv2.WebApp) []string {
	e := app.Spec.Expose
	if e == nil {
		return nil
	}
	scheme := "http"
	if e.TLS != nil {
		scheme = "https"
	}
	var urls []string
	for _, h := range e.Hosts {
		for _, p := range exposePaths(e) {
			urls = append(urls, scheme+"://"+string(h)+p)
		}
	}
	return urls
}
