/**
 * verbs4j's native layer: the jextract-generated raw bindings of libibverbs and librdmacm, the
 * hand-written dispatch for the static inline verbs, library loading and errno capture.
 * Grant it native access with {@code --enable-native-access=org.verbs4j.natives}.
 */
module org.verbs4j.natives {
    requires org.slf4j;

    exports org.verbs4j.natives;
    exports org.verbs4j.natives.generated.ibverbs;
    exports org.verbs4j.natives.generated.rdmacm;

    uses org.verbs4j.natives.FailureFactory;
}
