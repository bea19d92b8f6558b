cat <<EOF
hello
EOF