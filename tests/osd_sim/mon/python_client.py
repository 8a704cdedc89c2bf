"""A plain Python gRPC client of the monitor over mutual TLS, as any user would write one.

usage: python_client.py GEN_DIR ADDR CLUSTER_DIR ENTITY get-map|mark-out ID

GEN_DIR holds mon_pb2.py / mon_pb2_grpc.py generated from proto/mon.proto. Prints the map's
epoch and pg_num (get-map) or the epoch after (mark-out); on an RPC error prints
"CODE: details" and exits 1.
"""
import sys


def main():
    gen, addr, cluster, entity, cmd = sys.argv[1:6]
    sys.path.insert(0, gen)
    import grpc
    import mon_pb2
    import mon_pb2_grpc

    def read(name):
        with open(f"{cluster}/pki/{name}", "rb") as f:
            return f.read()

    creds = grpc.ssl_channel_credentials(
        root_certificates=read("ca.crt"),
        private_key=read(f"{entity}.key"),
        certificate_chain=read(f"{entity}.crt"))
    # The monitor's certificate names mon.msgr, whatever address it listens on.
    options = [("grpc.ssl_target_name_override", "mon.msgr")]
    with grpc.secure_channel(addr, creds, options=options) as channel:
        stub = mon_pb2_grpc.MonitorStub(channel)
        try:
            if cmd == "get-map":
                m = stub.GetMap(mon_pb2.GetMapRequest(), timeout=5)
                print(f"epoch {m.epoch} pg_num {m.pg_num}")
            elif cmd == "mark-out":
                r = stub.MarkOut(mon_pb2.MarkRequest(id=int(sys.argv[6])), timeout=5)
                print(f"epoch {r.epoch}")
            else:
                sys.exit(f"unknown command {cmd}")
        except grpc.RpcError as e:
            print(f"{e.code().name}: {e.details()}")
            sys.exit(1)


if __name__ == "__main__":
    main()
