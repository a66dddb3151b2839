package io.kafkaio.testing.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;

/**
 * The registry's list of runtime-editable settings, which its build-time config-index
 * extension would generate (that extension's deployment artifact is not on Maven Central).
 * Empty: the test registry changes no setting at runtime.
 */
@ApplicationScoped
public class ConfigPropertyListProducer {
    @Produces
    @ApplicationScoped
    DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new DynamicConfigPropertyList(List.of());
    }
}
