// cluster-dns: the cluster's DNS where CoreDNS cannot be built (its v1.7.0 source has no
// vendor/ and its modules are in no package source this build reaches). Built from the
// Kubernetes tree's own vendored client-go and miekg/dns, it answers what pods ask of
// CoreDNS's kubernetes plugin:
//
//	SERVICE.NAMESPACE.svc.DOMAIN            A: the Service's cluster IP; for a headless
//	                                        Service, each ready endpoint's address;
//	                                        CNAME for an ExternalName Service
//	_PORT._PROTOCOL.SERVICE.NAMESPACE.svc.DOMAIN
//	                                        SRV: the Service's named port
//	A-B-C-D.NAMESPACE.pod.DOMAIN            A: the address the name spells
//
// Other names under DOMAIN do not exist (NXDOMAIN); names outside it are forwarded to the
// name servers of the pod's own /etc/resolv.conf (the node's, with dnsPolicy: Default).
// As CoreDNS's health and ready plugins, it answers /health on :8080 once it runs and /ready
// on :8181 once it has read every Service and Endpoints object.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The answers' time to live, in seconds: CoreDNS's kubernetes plugin's default.
const ttl = 5

type resolver struct {
	domain    string // "cluster.local." (lower case, fully qualified)
	services  listers.ServiceLister
	endpoints listers.EndpointsLister
	upstream  []string // "ADDRESS:53"
	client    *dns.Client
}

func fail(format string, arguments ...interface{}) {
	fmt.Fprintf(os.Stderr, "cluster-dns: "+format+"\n", arguments...)
	os.Exit(1)
}

func main() {
	domain := flag.String("domain", "cluster.local", "the cluster's DNS domain")
	listen := flag.String("listen", ":53", "where to answer DNS, over UDP and TCP")
	resolvConf := flag.String("resolv-conf", "/etc/resolv.conf", "the name servers of names outside the domain")
	flag.Parse()

	config, err := rest.InClusterConfig()
	if err != nil {
		fail("not in a pod with a service account: %v", err)
	}
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail("%v", err)
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)
	services := factory.Core().V1().Services()
	endpoints := factory.Core().V1().Endpoints()
	r := &resolver{
		domain:    dns.Fqdn(strings.ToLower(*domain)),
		services:  services.Lister(),
		endpoints: endpoints.Lister(),
		client:    &dns.Client{Timeout: 2 * time.Second},
	}
	if upstream, err := dns.ClientConfigFromFile(*resolvConf); err == nil {
		for _, server := range upstream.Servers {
			r.upstream = append(r.upstream, net.JoinHostPort(server, upstream.Port))
		}
	} else {
		fmt.Fprintf(os.Stderr, "cluster-dns: %s: %v; names outside %s get no answer\n", *resolvConf, err, r.domain)
	}

	var ready atomic.Value
	ready.Store(false)
	stop := make(chan struct{})
	factory.Start(stop)
	go func() {
		if cache.WaitForCacheSync(stop, services.Informer().HasSynced, endpoints.Informer().HasSynced) {
			ready.Store(true)
		}
	}()

	dns.HandleFunc(".", r.answer)
	for _, network := range []string{"udp", "tcp"} {
		server := &dns.Server{Addr: *listen, Net: network}
		go func(network string) {
			fail("serving DNS over %s on %s: %v", network, *listen, server.ListenAndServe())
		}(network)
	}
	go func() {
		health := http.NewServeMux()
		health.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "OK") })
		fail("serving /health on :8080: %v", http.ListenAndServe(":8080", health))
	}()
	readiness := http.NewServeMux()
	readiness.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if ready.Load().(bool) {
			fmt.Fprintln(w, "OK")
			return
		}
		http.Error(w, "the Services are not read yet", http.StatusServiceUnavailable)
	})
	fail("serving /ready on :8181: %v", http.ListenAndServe(":8181", readiness))
}

// answer replies to one query: from the cluster's objects under the domain, else from the
// upstream servers.
func (r *resolver) answer(w dns.ResponseWriter, query *dns.Msg) {
	reply := new(dns.Msg)
	if len(query.Question) != 1 {
		reply.SetRcode(query, dns.RcodeFormatError)
		_ = w.WriteMsg(reply)
		return
	}
	question := query.Question[0]
	name := strings.ToLower(question.Name)
	if name != r.domain && !strings.HasSuffix(name, "."+r.domain) {
		r.forward(w, query)
		return
	}
	reply.SetReply(query)
	reply.Authoritative = true
	records, exists := r.lookup(strings.TrimSuffix(strings.TrimSuffix(name, r.domain), "."), question)
	switch {
	case !exists:
		reply.Rcode = dns.RcodeNameError
		reply.Ns = []dns.RR{r.soa()}
	case len(records) == 0:
		reply.Ns = []dns.RR{r.soa()} // the name exists, without records of this type
	default:
		reply.Answer = records
	}
	_ = w.WriteMsg(reply)
}

// lookup finds the records of type question.Qtype for the labels before the domain
// (SERVICE.NAMESPACE.svc, …), and whether the name exists at all.
func (r *resolver) lookup(prefix string, question dns.Question) ([]dns.RR, bool) {
	parts := strings.Split(prefix, ".")
	header := dns.RR_Header{Name: question.Name, Class: dns.ClassINET, Ttl: ttl}
	switch {
	case prefix == "" || prefix == "svc" || prefix == "pod":
		return nil, true
	case len(parts) == 2 && parts[1] == "svc", len(parts) == 2 && parts[1] == "pod":
		return nil, r.namespaceExists(parts[0])
	case len(parts) == 3 && parts[2] == "pod":
		address := net.ParseIP(strings.ReplaceAll(parts[0], "-", ".")).To4()
		if address == nil {
			return nil, false
		}
		if question.Qtype != dns.TypeA {
			return nil, true
		}
		header.Rrtype = dns.TypeA
		return []dns.RR{&dns.A{Hdr: header, A: address}}, true
	case len(parts) == 3 && parts[2] == "svc":
		service, err := r.services.Services(parts[1]).Get(parts[0])
		if err != nil {
			return nil, false
		}
		return r.serviceRecords(service, question, header), true
	case len(parts) == 5 && parts[4] == "svc" && strings.HasPrefix(parts[0], "_") && strings.HasPrefix(parts[1], "_"):
		service, err := r.services.Services(parts[3]).Get(parts[2])
		if err != nil {
			return nil, false
		}
		target := dns.Fqdn(parts[2] + "." + parts[3] + ".svc." + strings.TrimSuffix(r.domain, "."))
		var records []dns.RR
		for _, port := range service.Spec.Ports {
			if "_"+strings.ToLower(port.Name) != parts[0] || "_"+strings.ToLower(string(port.Protocol)) != parts[1] {
				continue
			}
			if question.Qtype == dns.TypeSRV {
				header.Rrtype = dns.TypeSRV
				records = append(records, &dns.SRV{Hdr: header, Priority: 0, Weight: 100, Port: uint16(port.Port), Target: target})
			}
			return records, true
		}
		return nil, false
	}
	return nil, false
}

// serviceRecords: a Service's A (or CNAME) records.
func (r *resolver) serviceRecords(service *corev1.Service, question dns.Question, header dns.RR_Header) []dns.RR {
	if service.Spec.Type == corev1.ServiceTypeExternalName {
		if question.Qtype != dns.TypeCNAME && question.Qtype != dns.TypeA {
			return nil
		}
		header.Rrtype = dns.TypeCNAME
		return []dns.RR{&dns.CNAME{Hdr: header, Target: dns.Fqdn(service.Spec.ExternalName)}}
	}
	if question.Qtype != dns.TypeA {
		return nil
	}
	header.Rrtype = dns.TypeA
	var addresses []net.IP
	if service.Spec.ClusterIP == corev1.ClusterIPNone {
		if endpoints, err := r.endpoints.Endpoints(service.Namespace).Get(service.Name); err == nil {
			for _, subset := range endpoints.Subsets {
				for _, address := range subset.Addresses {
					addresses = append(addresses, net.ParseIP(address.IP))
				}
			}
		}
	} else {
		addresses = append(addresses, net.ParseIP(service.Spec.ClusterIP))
	}
	var records []dns.RR
	for _, address := range addresses {
		if v4 := address.To4(); v4 != nil {
			records = append(records, &dns.A{Hdr: header, A: v4})
		}
	}
	return records
}

// namespaceExists: whether some Service lives in the namespace (the objects this server
// reads; CoreDNS answers for every namespace name the same way when it cannot list them).
func (r *resolver) namespaceExists(namespace string) bool {
	services, err := r.services.Services(namespace).List(labels.Everything())
	return err == nil && len(services) > 0
}

// soa: the domain's start of authority, for negative answers.
func (r *resolver) soa() dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: r.domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      "ns.dns." + r.domain,
		Mbox:    "hostmaster." + r.domain,
		Serial:  1,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  ttl,
	}
}

// forward asks the upstream servers in turn; SERVFAIL when none answers.
func (r *resolver) forward(w dns.ResponseWriter, query *dns.Msg) {
	for _, server := range r.upstream {
		network := "udp"
		if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
			network = "tcp"
		}
		client := *r.client
		client.Net = network
		if reply, _, err := client.Exchange(query, server); err == nil {
			_ = w.WriteMsg(reply)
			return
		}
	}
	reply := new(dns.Msg)
	reply.SetRcode(query, dns.RcodeServerFailure)
	_ = w.WriteMsg(reply)
}
