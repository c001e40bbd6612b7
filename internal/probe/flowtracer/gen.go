package flowtracer

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type ft_key -type ft_origin -type ft_stat flowtracer flowtracer.bpf.c -- -I../../../bpf/include
