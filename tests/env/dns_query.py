#!/usr/bin/env python3
"""Ask a DNS server for one name over UDP and print its answers; exit 1 when there are none.

    dns_query.py SERVER PORT NAME [TYPE]     e.g. 127.0.0.1 5353 www.demo.example. A

Only what the demo and CI need (A, AAAA, MX, NS, TXT, CNAME answers; stdlib only), so that
"PowerDNS serves the zone" is checked over DNS itself, not through its API.
"""
import ipaddress
import random
import socket
import struct
import sys

TYPES = {"A": 1, "NS": 2, "CNAME": 5, "MX": 15, "TXT": 16, "AAAA": 28}


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def decode_name(msg, at):
    labels, jumped, end = [], False, at
    while True:
        length = msg[at]
        if length & 0xC0 == 0xC0:  # a pointer to an earlier name
            if not jumped:
                end = at + 2
            at, jumped = struct.unpack("!H", msg[at:at + 2])[0] & 0x3FFF, True
            continue
        if length == 0:
            return ".".join(labels) + ".", (end if jumped else at + 1)
        labels.append(msg[at + 1:at + 1 + length].decode())
        at += 1 + length


def rdata_text(msg, rtype, at, length):
    data = msg[at:at + length]
    if rtype == 1:
        return str(ipaddress.IPv4Address(data))
    if rtype == 28:
        return str(ipaddress.IPv6Address(data))
    if rtype in (2, 5):
        return decode_name(msg, at)[0]
    if rtype == 15:
        return f"{struct.unpack('!H', data[:2])[0]} {decode_name(msg, at + 2)[0]}"
    return data[1:].decode(errors="replace")


def query(server, port, name, rtype):
    ident = random.randrange(1 << 16)
    packet = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + encode_name(name) + struct.pack("!HH", rtype, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        s.sendto(packet, (server, port))
        msg, _ = s.recvfrom(4096)
    got_id, flags, qd, an, _, _ = struct.unpack("!HHHHHH", msg[:12])
    if got_id != ident:
        raise SystemExit(f"{name}: answer with another id")
    rcode = flags & 0xF
    at = 12
    for _ in range(qd):
        at = decode_name(msg, at)[1] + 4
    answers = []
    for _ in range(an):
        owner, at = decode_name(msg, at)
        t, _cls, ttl, length = struct.unpack("!HHIH", msg[at:at + 10])
        at += 10
        if t == rtype:
            answers.append((owner, ttl, rdata_text(msg, t, at, length)))
        at += length
    return rcode, answers


def main():
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    server, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    type_name = sys.argv[4] if len(sys.argv) == 5 else "A"
    rcode, answers = query(server, port, name, TYPES[type_name])
    if rcode != 0 or not answers:
        raise SystemExit(f"{server}:{port} has no {type_name} answer for {name} (rcode {rcode})")
    for owner, ttl, text in answers:
        print(f"  {owner} {ttl} {type_name} {text}   (DNS answer from {server}:{port})")


if __name__ == "__main__":
    main()
