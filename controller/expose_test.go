package controller

import (
	"errors"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

func TestExposedCondition(t *testing.T) {
	viaIngress := webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Ingress: &webappv2.IngressRef{ClassName: "traefik"}}
	viaGateway := webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public", Namespace: "infra"}}
	withAddress := &networkingv1.Ingress{Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
		Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.9"}, {Hostname: "lb.example.com"}}}}}
	infra := gwv1.Namespace("infra")
	route := func(gen int64, parent string, conds ...metav1.Condition) *gwv1.HTTPRoute {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		r.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: gwv1.ObjectName(parent), Namespace: &infra},
			ControllerName: "traefik.io/gateway-controller", Conditions: conds}}
		return r
	}
	cond := func(t, s, reason string, gen int64) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionStatus(s), Reason: reason, Message: "words of " + reason, ObservedGeneration: gen}
	}
	accepted, resolved := cond("Accepted", "True", "Accepted", 2), cond("ResolvedRefs", "True", "ResolvedRefs", 2)
	cases := []struct {
		name           string
		expose         webappv2.Expose
		served         bool
		ing            *networkingv1.Ingress
		route          *gwv1.HTTPRoute
		err            error
		status, reason string
		inMessage      string
	}{
		{"ingress not created yet", viaIngress, true, nil, nil, nil, "False", webappv2.ReasonWaitingForAddress, "not been created"},
		{"ingress without an address", viaIngress, true, &networkingv1.Ingress{}, nil, nil, "False", webappv2.ReasonWaitingForAddress, `class "traefik" has not published`},
		{"ingress with addresses", viaIngress, true, withAddress, nil, nil, "True", webappv2.ReasonExposed, "10.0.0.9, lb.example.com"},
		{"no Gateway API", viaGateway, false, nil, nil, nil, "False", webappv2.ReasonGatewayAPIMissing, "install the Gateway API CRDs"},
		{"route not created yet", viaGateway, true, nil, nil, nil, "False", webappv2.ReasonWaitingForGateway, "not been created"},
		{"no verdict yet", viaGateway, true, nil, &gwv1.HTTPRoute{}, nil, "False", webappv2.ReasonWaitingForGateway, "no controller of Gateway infra/public"},
		{"another gateway's verdict", viaGateway, true, nil, route(2, "other", accepted, resolved), nil, "False", webappv2.ReasonWaitingForGateway, "no controller"},
		{"a verdict on an older generation", viaGateway, true, nil, route(3, "public", accepted, resolved), nil, "False", webappv2.ReasonWaitingForGateway, "current spec"},
		{"not accepted", viaGateway, true, nil, route(2, "public", cond("Accepted", "False", "NotAllowedByListeners", 2)), nil, "False", webappv2.ReasonRouteNotAccepted, "NotAllowedByListeners"},
		{"backend not resolved", viaGateway, true, nil, route(2, "public", accepted, cond("ResolvedRefs", "False", "BackendNotFound", 2)), nil, "False", webappv2.ReasonRouteRefsNotResolved, "BackendNotFound"},
		{"accepted and resolved", viaGateway, true, nil, route(2, "public", accepted, resolved), nil, "True", webappv2.ReasonExposed, "traefik.io/gateway-controller"},
		{"this spec's route refused", viaGateway, true, nil, route(2, "public", accepted, resolved), errors.New("HTTPRoute.gateway.networking.k8s.io \"shop\" is invalid"), "False", webappv2.ReasonReconcileError, "was not applied"},
		{"another listener's verdict", webappv2.Expose{Hosts: viaGateway.Hosts, Gateway: &webappv2.GatewayRef{Name: "public", Namespace: "infra", SectionName: "https"}}, true, nil, route(2, "public", accepted, resolved), nil, "False", webappv2.ReasonWaitingForGateway, "no controller"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := exposedCondition(apptest.Exposed(tc.expose), tc.served, tc.ing, tc.route, tc.err)
			if c.Type != webappv2.ConditionExposed || string(c.Status) != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.inMessage) {
				t.Errorf("got %s %s %q, want %s %s containing %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.inMessage)
			}
		})
	}
}
