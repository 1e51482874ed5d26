# envman devcontainer image for p: the run image plus a named user that
# updateRemoteUserUID maps to your uid (envman run uses --user for the same). Generated.
FROM r/p@sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd
USER root
RUN getent passwd envman >/dev/null || { uid=1000; while getent passwd "$uid" >/dev/null; do uid=$((uid + 1)); done; \
      getent group "$uid" >/dev/null || echo "envman:x:$uid:" >>/etc/group; \
      echo "envman:x:$uid:$uid:envman user:/home/envman:/bin/sh" >>/etc/passwd; }
