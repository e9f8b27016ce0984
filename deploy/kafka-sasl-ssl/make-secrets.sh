#!/usr/bin/env bash
# Secrets for deploy/compose.sasl-ssl.yaml: a private CA, the broker's TLS keystore (PKCS12,
# certificate for the names kafka and localhost), the broker's JAAS file with SASL/PLAIN users,
# and each client's credentials. Needs openssl. Passwords come from the environment (none is
# invented or printed):
#
#   KAFKA_ADMIN_PASSWORD=... KAFKA_CLIENT_PASSWORD=... bash deploy/kafka-sasl-ssl/make-secrets.sh
#
# Writes deploy/kafka-sasl-ssl/secrets/{broker,client}/ (git-ignored). The files are readable
# by the containers' users (Kafka runs as uid 1000, streammkl as 10001) through the bind mounts:
# keep the repository checkout itself private on a shared host.
set -euo pipefail

: "${KAFKA_ADMIN_PASSWORD:?set KAFKA_ADMIN_PASSWORD (the SASL user of the broker itself)}"
: "${KAFKA_CLIENT_PASSWORD:?set KAFKA_CLIENT_PASSWORD (the streammkl user: daemon, simulator)}"
KEYSTORE_PASSWORD="${KAFKA_KEYSTORE_PASSWORD:-$(openssl rand -hex 16)}"
OUT="${1:-$(dirname "$0")/secrets}"
DAYS="${DAYS:-825}"

mkdir -p "$OUT/broker" "$OUT/client" "$OUT/ca"
chmod 700 "$OUT/ca"
cd "$OUT"

openssl req -x509 -newkey rsa:3072 -nodes -keyout ca/ca.key -out ca/ca.pem -days "$DAYS" \
    -subj "/CN=streammkl Kafka CA" 2>/dev/null
printf 'subjectAltName=DNS:kafka,DNS:localhost\nextendedKeyUsage=serverAuth\n' > ca/san.cnf
openssl req -newkey rsa:3072 -nodes -keyout ca/broker.key -out ca/broker.csr \
    -subj "/CN=kafka" 2>/dev/null
openssl x509 -req -in ca/broker.csr -CA ca/ca.pem -CAkey ca/ca.key -CAcreateserial \
    -out ca/broker.pem -days "$DAYS" -extfile ca/san.cnf 2>/dev/null
openssl pkcs12 -export -in ca/broker.pem -inkey ca/broker.key -certfile ca/ca.pem \
    -name kafka -out broker/kafka.p12 -passout "pass:$KEYSTORE_PASSWORD"
printf '%s' "$KEYSTORE_PASSWORD" > broker/keystore_creds
printf '%s' "$KEYSTORE_PASSWORD" > broker/key_creds
cp ca/ca.pem broker/ca.pem
cp ca/ca.pem client/ca.pem

# SASL/PLAIN users of the broker: admin (the broker itself, between its listeners; kafka-init)
# and streammkl (the daemon and the simulator).
cat > broker/kafka_server_jaas.conf <<JAAS
KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
  username="admin"
  password="$KAFKA_ADMIN_PASSWORD"
  user_admin="$KAFKA_ADMIN_PASSWORD"
  user_streammkl="$KAFKA_CLIENT_PASSWORD";
};
JAAS
# kafka-topics.sh / kafka-broker-api-versions.sh (kafka-init, the healthcheck) as admin
cat > broker/client.properties <<PROPS
security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$KAFKA_ADMIN_PASSWORD";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/secrets/ca.pem
PROPS
# the daemon reads its password from a file (kafka.sasl_password_file); the simulator from
# its --kafka-config JSON
printf '%s' "$KAFKA_CLIENT_PASSWORD" > client/kafka-password
python3 - "$KAFKA_CLIENT_PASSWORD" > client/simulator-kafka.json <<'PY'
import json, sys
print(json.dumps({
    "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "streammkl", "sasl_plain_password": sys.argv[1],
    "ssl_cafile": "/run/streammkl/ca.pem",
}))
PY
chmod 755 broker client
chmod 644 broker/* client/*
rm -f ca/broker.csr ca/ca.srl
echo "wrote $OUT/broker and $OUT/client (CA key kept in $OUT/ca)"
