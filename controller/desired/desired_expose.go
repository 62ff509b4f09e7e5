package desired

import (
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
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
	backend := networkingv1ac.IngressBackend().WithService(networkingv1ac.IngressServiceBackend().
		WithName(app.Name).WithPort(networkingv1ac.ServiceBackendPort().WithName(ports(app)[0].Name)))
	spec := networkingv1ac.IngressSpec().WithIngressClassName(e.Ingress.ClassName)
	for _, h := range e.Hosts {
		http := networkingv1ac.HTTPIngressRuleValue()
		for _, p := range exposePaths(e) {
			http.WithPaths(networkingv1ac.HTTPIngressPath().WithPath(p).WithPathType(networkingv1.PathTypePrefix).WithBackend(backend))
		}
		spec.WithRules(networkingv1ac.IngressRule().WithHost(string(h)).WithHTTP(http))
	}
	if e.TLS != nil {
		tls := networkingv1ac.IngressTLS().WithSecretName(e.TLS.SecretName)
		for _, h := range e.Hosts {
			tls.WithHosts(string(h))
		}
		spec.WithTLS(tls)
	}
	return networkingv1ac.Ingress(app.Name, app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec)
}

// HTTPRoute is the complete HTTPRoute we mean to own for app, or nil when app is not exposed through a
// Gateway: attached to the Gateway (and listener) it names, for its hosts, one rule matching its path prefixes
// to the Service's primary port. The fields the Gateway API's CRD defaults are set to those defaults, so what we
// own compares equal.
func HTTPRoute(app *webappv2.WebApp, canaryWeight int32) *gwv1ac.HTTPRouteApplyConfiguration {
	e := app.Spec.Expose
	if e == nil || e.Gateway == nil {
		return nil
	}
	parent := gwv1ac.ParentReference().WithGroup(gwv1.GroupName).WithKind("Gateway").WithName(gwv1.ObjectName(e.Gateway.Name))
	if e.Gateway.Namespace != "" {
		parent.WithNamespace(gwv1.Namespace(e.Gateway.Namespace))
	}
	if e.Gateway.SectionName != "" {
		parent.WithSectionName(gwv1.SectionName(e.Gateway.SectionName))
	}
	// The stable Service, and while a canary runs, the canary's by its weight.
	rule := gwv1ac.HTTPRouteRule().WithBackendRefs(RouteBackends(app, canaryWeight)...)
	for _, p := range exposePaths(e) {
		rule.WithMatches(gwv1ac.HTTPRouteMatch().WithPath(gwv1ac.HTTPPathMatch().WithType(gwv1.PathMatchPathPrefix).WithValue(p)))
	}
	spec := gwv1ac.HTTPRouteSpec().WithParentRefs(parent).WithRules(rule)
	for _, h := range e.Hosts {
		spec.WithHostnames(gwv1.Hostname(h))
	}
	return gwv1ac.HTTPRoute(app.Name, app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec)
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
