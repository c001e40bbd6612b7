package syscap

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type syscap_conn -type syscap_conn_rec -type syscap_close_rec -type syscap_data_hdr -type syscap_proto -type syscap_dir -type syscap_role -type syscap_l4 -type syscap_state -type syscap_rec_type -type ssl_call -type ssl_key -type syscap_sc_key -type syscap_sc_val -type syscap_sc_class -type syscap_sc_ioctl -type syscap_tprof_rec -type syscap_tprof_thread -type syscap_tprof_type -type syscap_tprof_call syscap syscap.bpf.c -- -I../../bpf/include
