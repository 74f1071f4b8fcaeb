// crictl, the subset kubeadm v1.20 and kURL's scripts call, built from the Kubernetes tree's
// own CRI client (pkg/kubelet/cri/remote): cri-tools' source is not in any package source this
// build reaches. It answers `crictl [-r|--runtime-endpoint ENDPOINT] COMMAND`:
//
//	info, version                 the runtime's status and version
//	pods [-q]                     pod sandboxes (ids with -q)
//	stopp ID..., rmp ID...        stop and remove pod sandboxes
//	ps [-a] [-q]                  containers (running only without -a)
//	stop ID..., rm ID...          stop and remove containers
//	images [-q], inspecti IMAGE   images; inspecti fails when IMAGE is absent
//	pull IMAGE, rmi IMAGE...      pull and remove images
//
// The endpoint comes from -r, else CONTAINER_RUNTIME_ENDPOINT, else /etc/crictl.yaml's
// runtime-endpoint, else containerd's socket. Anything else fails, naming what it does.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1alpha2"
	"k8s.io/kubernetes/pkg/kubelet/cri/remote"
)

const timeout = 10 * time.Second

func fail(format string, arguments ...interface{}) {
	fmt.Fprintf(os.Stderr, "crictl: "+format+"\n", arguments...)
	os.Exit(1)
}

// endpoint is where the runtime answers, as cri-tools finds it.
func endpoint(given string) string {
	if given != "" {
		return given
	}
	if value := os.Getenv("CONTAINER_RUNTIME_ENDPOINT"); value != "" {
		return value
	}
	if file, err := os.Open("/etc/crictl.yaml"); err == nil {
		defer file.Close()
		lines := bufio.NewScanner(file)
		for lines.Scan() {
			key, value, found := strings.Cut(lines.Text(), ":")
			if found && strings.TrimSpace(key) == "runtime-endpoint" {
				return strings.Trim(strings.TrimSpace(value), `"'`)
			}
		}
	}
	return "unix:///run/containerd/containerd.sock"
}

func main() {
	arguments := os.Args[1:]
	given := ""
	for len(arguments) > 0 && strings.HasPrefix(arguments[0], "-") {
		switch flag := arguments[0]; {
		case flag == "-r" || flag == "--runtime-endpoint" || flag == "-i" || flag == "--image-endpoint":
			if len(arguments) < 2 {
				fail("%s needs a value", flag)
			}
			if flag == "-r" || flag == "--runtime-endpoint" {
				given = arguments[1]
			}
			arguments = arguments[2:]
		case strings.HasPrefix(flag, "--runtime-endpoint="):
			given = strings.TrimPrefix(flag, "--runtime-endpoint=")
			arguments = arguments[1:]
		default:
			fail("%s: not an option this crictl takes (it takes -r/--runtime-endpoint)", flag)
		}
	}
	if len(arguments) == 0 {
		fail("no command: info, version, pods, stopp, rmp, ps, stop, rm, images, inspecti, pull, rmi")
	}
	command, rest := arguments[0], arguments[1:]
	flags := map[string]bool{}
	var operands []string
	for _, argument := range rest {
		if strings.HasPrefix(argument, "-") {
			flags[argument] = true
		} else {
			operands = append(operands, argument)
		}
	}
	quiet := flags["-q"] || flags["--quiet"]
	address := endpoint(given)
	runtimeService, err := remote.NewRemoteRuntimeService(address, timeout)
	if err != nil {
		fail("connecting to %s: %v", address, err)
	}
	imageService, err := remote.NewRemoteImageService(address, timeout)
	if err != nil {
		fail("connecting to %s: %v", address, err)
	}
	print := func(value interface{}) {
		text, _ := json.MarshalIndent(value, "", "  ")
		fmt.Println(string(text))
	}
	switch command {
	case "info":
		status, err := runtimeService.Status()
		if err != nil {
			fail("info: %v", err)
		}
		print(map[string]interface{}{"status": status})
	case "version":
		version, err := runtimeService.Version("v1alpha2")
		if err != nil {
			fail("version: %v", err)
		}
		fmt.Printf("Version:  %s\nRuntimeName:  %s\nRuntimeVersion:  %s\nRuntimeApiVersion:  %s\n",
			version.Version, version.RuntimeName, version.RuntimeVersion, version.RuntimeApiVersion)
	case "pods":
		pods, err := runtimeService.ListPodSandbox(nil)
		if err != nil {
			fail("pods: %v", err)
		}
		for _, pod := range pods {
			if quiet {
				fmt.Println(pod.Id)
			} else {
				fmt.Printf("%s\t%s\t%s\t%s\n", pod.Id, pod.State, pod.Metadata.Name, pod.Metadata.Namespace)
			}
		}
	case "stopp", "rmp", "stop", "rm":
		if len(operands) == 0 {
			fail("%s needs an id", command)
		}
		for _, id := range operands {
			var err error
			switch command {
			case "stopp":
				err = runtimeService.StopPodSandbox(id)
			case "rmp":
				err = runtimeService.RemovePodSandbox(id)
			case "stop":
				err = runtimeService.StopContainer(id, 10)
			case "rm":
				err = runtimeService.RemoveContainer(id)
			}
			if err != nil {
				fail("%s %s: %v", command, id, err)
			}
			fmt.Println(id)
		}
	case "ps":
		var filter *runtimeapi.ContainerFilter
		if !flags["-a"] && !flags["--all"] {
			filter = &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{
				State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
		}
		containers, err := runtimeService.ListContainers(filter)
		if err != nil {
			fail("ps: %v", err)
		}
		for _, container := range containers {
			if quiet {
				fmt.Println(container.Id)
			} else {
				fmt.Printf("%s\t%s\t%s\t%s\n", container.Id, container.Image.Image, container.State,
					container.Metadata.Name)
			}
		}
	case "images":
		images, err := imageService.ListImages(nil)
		if err != nil {
			fail("images: %v", err)
		}
		for _, image := range images {
			if quiet {
				fmt.Println(image.Id)
			} else {
				fmt.Printf("%s\t%s\n", strings.Join(image.RepoTags, ","), image.Id)
			}
		}
	case "inspecti", "pull", "rmi":
		if len(operands) == 0 {
			fail("%s needs an image", command)
		}
		for _, name := range operands {
			spec := &runtimeapi.ImageSpec{Image: name}
			switch command {
			case "inspecti":
				image, err := imageService.ImageStatus(spec)
				if err != nil {
					fail("inspecti %s: %v", name, err)
				}
				if image == nil {
					fail("inspecti %s: no such image", name)
				}
				print(map[string]interface{}{"status": image})
			case "pull":
				reference, err := imageService.PullImage(spec, nil, nil)
				if err != nil {
					fail("pull %s: %v", name, err)
				}
				fmt.Printf("Image is up to date for %s\n", reference)
			case "rmi":
				if err := imageService.RemoveImage(spec); err != nil {
					fail("rmi %s: %v", name, err)
				}
				fmt.Printf("Deleted: %s\n", name)
			}
		}
	default:
		fail("%s: not a command this crictl has (info, version, pods, stopp, rmp, ps, stop, rm, images, inspecti, pull, rmi)", command)
	}
}
